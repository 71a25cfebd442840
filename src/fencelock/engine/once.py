"""Run-once jobs with ShedLock's two durations, without I/O.

``at_most``: the lease's TTL, never renewed: the safety net that frees the name if the
node running the job dies. ``at_least``: how long the name stays taken from the start
of the run even when the job finishes sooner, so that nodes whose clocks or schedules
differ by a little do not run a fast job twice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fencelock.engine.timing import MIN_TTL, validate_ttl
from fencelock.errors import ConfigError


@dataclass(frozen=True)
class OnceTerms:
    at_most: float
    at_least: float

    def keep_for(self, elapsed: float) -> float | None:
        """After a run of ``elapsed`` seconds: how long the name must stay taken from
        now (never less than the smallest TTL a server takes), or None: release it."""
        left = self.at_least - elapsed
        return max(left, MIN_TTL) if left > 0 else None


def once_terms(at_most: object, at_least: object = 0.0) -> OnceTerms:
    """The two durations checked; :class:`ConfigError` naming the wrong one."""
    most = validate_ttl(at_most, "at_most")
    if isinstance(at_least, bool) or not isinstance(at_least, (int, float)):
        raise ConfigError(f"at_least must be a number of seconds, not {type(at_least).__name__}")
    least = float(at_least)
    if math.isnan(least) or least < 0:
        raise ConfigError(f"at_least must be >= 0 seconds, got {at_least!r}")
    if least > most:
        raise ConfigError(
            f"at_least ({least:g}s) is longer than at_most ({most:g}s): the lease would end "
            "before the name may be taken again"
        )
    return OnceTerms(most, least)
