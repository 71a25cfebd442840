"""The one local clock fencelock measures durations with.

``CLOCK_BOOTTIME`` where the platform has it: it never jumps with the wall clock
and, unlike ``CLOCK_MONOTONIC``, keeps counting while the machine is suspended, so
a lease held across a suspend is seen as expired rather than still valid. It is
one clock for every process on the host, which the SQLite backend relies on.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

_CLOCK_ID: int | None = getattr(time, "CLOCK_BOOTTIME", None)

# Seconds on the host's shared, never-decreasing clock: the clock read itself, not a
# function around it (a lock cycle reads it ten times). The simulator replaces it
# (fencelock.sim), which is why every caller reads ``clock.now`` at the call.
now: Callable[[], float] = (
    time.monotonic if _CLOCK_ID is None else functools.partial(time.clock_gettime, _CLOCK_ID)
)
