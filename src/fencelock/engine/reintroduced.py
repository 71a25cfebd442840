"""Historical bugs, put back on purpose: a switch per bug, off unless the simulator
(:mod:`fencelock.sim`) turns one on to show that it finds it. Nothing else sets them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from fencelock.errors import ConfigError

# Each switch, and the bug it puts back.
KNOWN = {
    "trust-from-reply": "a renewal's trust counted from its reply, not from when it was sent",
    "no-trust-at-send": "an extend to a shorter TTL trusted as before until its answer came",
    "late-try-forgotten": "an acquire's unanswered try, landing after an extend, not bounding it",
    "extend-renewal-race": "an extend and a renewal of one lease in flight at once",
}

_on: set[str] = set()


def on(bug: str) -> bool:
    """Whether ``bug`` is put back now."""
    return bug in _on


@contextlib.contextmanager
def reintroduced(*bugs: str) -> Iterator[None]:
    """Within: ``bugs`` are back."""
    unknown = set(bugs) - set(KNOWN)
    if unknown:
        raise ConfigError(f"no such historical bug: {', '.join(sorted(unknown))}")
    before = set(_on)
    _on.clear()
    _on.update(bugs)
    try:
        yield
    finally:
        _on.clear()
        _on.update(before)
