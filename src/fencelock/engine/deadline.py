"""A call's deadline, from the time the caller read: when a call given ``timeout``
seconds must end, and how long it has left (no clock here)."""

from __future__ import annotations


def deadline_after(now: float, timeout: float | None) -> float | None:
    """When a call begun at ``now`` with ``timeout`` must end (None: it may wait forever)."""
    return None if timeout is None else now + timeout


def time_left(deadline: float | None, now: float) -> float | None:
    """Seconds from ``now`` to ``deadline``, never below 0 (None: no deadline)."""
    return None if deadline is None else max(0.0, deadline - now)
