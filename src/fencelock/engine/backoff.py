"""The one retry schedule: waits whose window doubles from ``first`` up to ``cap``, each
drawn at random from its window's upper part.

``spread`` is the share of the window that is random: 1.0 draws from ``[0, window)``
("full jitter": retries that collided once spread out most), 0.5 from
``[window/2, window)`` ("equal jitter": never much shorter than the window, for a
retry that polls a server), 0.0 waits the window exactly. Pure: time and randomness
are the caller's. Used by the acquire flow, optimistic updates, and the etcd client's
retries.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from fencelock.errors import ConfigError

# Past this many doublings every window is the cap (2**64 overflows no float, but why).
_DOUBLINGS = 64


@dataclass(frozen=True)
class Backoff:
    """Retry ``n`` (0-based) waits ``window(n) * (1 - spread + spread * random())``,
    ``window(n) = min(cap, first * 2**n)``."""

    first: float
    cap: float
    spread: float = 1.0

    def __post_init__(self) -> None:
        check_window(("first", self.first), ("cap", self.cap))
        if not 0.0 <= self.spread <= 1.0:
            raise ConfigError(f"spread must be within [0, 1], got {self.spread!r}")

    def window(self, retry: int) -> float:
        """The window of retry number ``retry`` (0-based)."""
        return self.cap if retry >= _DOUBLINGS else min(self.cap, self.first * 2**retry)

    def delay(self, retry: int, random: Callable[[], float]) -> float:
        """The wait before retry ``retry``; ``random`` returns floats in [0, 1)."""
        return self.window(retry) * (1.0 - self.spread + self.spread * random())

    def waits(self, random: Callable[[], float]) -> Iterator[float]:
        """The waits before retries 0, 1, 2, … (endless: the caller decides when to stop)."""
        retry = 0
        while True:
            yield self.delay(retry, random)
            retry += 1


def check_window(first: tuple[str, object], cap: tuple[str, object]) -> None:
    """Raise ConfigError unless both (name, value) pairs are seconds (finite, >= 0) and
    the cap is not below the first: the check every schedule's settings pass."""
    for name, value in (first, cap):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{name} must be seconds, not {value!r}")
        if not math.isfinite(value) or value < 0:
            raise ConfigError(f"{name} must be finite and >= 0 seconds, got {value!r}")
    if cap[1] < first[1]:  # type: ignore[operator]
        raise ConfigError(f"{cap[0]} ({cap[1]}) must not be below {first[0]} ({first[1]})")
