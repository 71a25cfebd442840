"""How an optimistic update retries: a bounded number of attempts, and between them a
wait drawn from a window that doubles each time, up to a cap ("full jitter", the one
schedule of :mod:`fencelock.engine.backoff`), so that writers who collided once do not
collide again in lockstep."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fencelock.engine.backoff import Backoff, check_window
from fencelock.errors import ConfigError


@dataclass(frozen=True)
class RetryPolicy:
    """``attempts`` tries in all; before retry ``n`` (0-based), a wait in
    ``[0, min(max_delay, base_delay * 2**n))``."""

    attempts: int = 5
    base_delay: float = 0.01
    max_delay: float = 0.5

    def __post_init__(self) -> None:
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int):
            raise ConfigError(f"attempts must be an int, not {self.attempts!r}")
        if self.attempts < 1:
            raise ConfigError(f"attempts must be at least 1, got {self.attempts}")
        check_window(("base_delay", self.base_delay), ("max_delay", self.max_delay))

    def delay(self, retry: int, random: Callable[[], float]) -> float:
        """The wait before retry number ``retry``; ``random`` returns floats in [0, 1)."""
        return Backoff(self.base_delay, self.max_delay, spread=1.0).delay(retry, random)
