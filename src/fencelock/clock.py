"""The one local clock fencelock measures durations with.

``CLOCK_BOOTTIME`` where the platform has it: it never jumps with the wall clock
and, unlike ``CLOCK_MONOTONIC``, keeps counting while the machine is suspended, so
a lease held across a suspend is seen as expired rather than still valid. It is
one clock for every process on the host, which the SQLite backend relies on.
"""

from __future__ import annotations

import time

_CLOCK_ID: int | None = getattr(time, "CLOCK_BOOTTIME", None)


def now() -> float:
    """Seconds on the host's shared, never-decreasing clock."""
    if _CLOCK_ID is not None:
        return time.clock_gettime(_CLOCK_ID)
    return time.monotonic()
