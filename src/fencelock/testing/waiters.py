"""How long this process's queued waiters stay in line without asking again, for tests.

Waiters refresh their place every ``WAITER_REFRESH`` seconds and are passed over after
``WAITER_LIVENESS`` seconds of silence (1 s and 3 s). A test that wants a dead waiter to
hold the line up longer (or a missed wake-up to show as seconds of waiting) sets both,
in the barging rule (which every backend reads, the Redis scripts' packed arguments too).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from fencelock.engine import barging
from fencelock.errors import ConfigError


def set_waiter_timing(refresh: float, liveness: float) -> tuple[float, float]:
    """Set both for this process; the (refresh, liveness) they were. A waiter must ask
    again before it counts as gone: ``0 < refresh < liveness`` (else ConfigError)."""
    if not 0 < refresh < liveness:
        raise ConfigError(
            f"waiter timing: need 0 < refresh < liveness, got refresh={refresh!r}, "
            f"liveness={liveness!r}"
        )
    before = (barging.WAITER_REFRESH, barging.WAITER_LIVENESS)
    barging.WAITER_REFRESH, barging.WAITER_LIVENESS = refresh, liveness
    return before


@contextlib.contextmanager
def waiter_timing(refresh: float, liveness: float) -> Iterator[None]:
    """:func:`set_waiter_timing` for the ``with`` block, then as before."""
    before = set_waiter_timing(refresh, liveness)
    try:
        yield
    finally:
        set_waiter_timing(*before)
