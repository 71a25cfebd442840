"""A call's deadline, from the time the caller read: when a call given ``timeout``
seconds must end, and how long it has left (no clock here)."""

from __future__ import annotations

from dataclasses import dataclass


def deadline_after(now: float, timeout: float | None) -> float | None:
    """When a call begun at ``now`` with ``timeout`` must end (None: it may wait forever)."""
    return None if timeout is None else now + timeout


def time_left(deadline: float | None, now: float) -> float | None:
    """Seconds from ``now`` to ``deadline``, never below 0 (None: no deadline)."""
    return None if deadline is None else max(0.0, deadline - now)


@dataclass(frozen=True)
class CallEnd:
    """When a call must be over: the caller's ``deadline`` (a clock time; None: none)
    plus ``request`` seconds for the request in flight (the URL's ``request_bound``).

    The one value a call's end travels as: the lock makes it, the bounded attempt cuts
    its calls off at :attr:`at`, and a blocking driver's socket waits read the same."""

    deadline: float | None
    request: float

    @property
    def at(self) -> float | None:
        """The time by which the call is over (None: never cut off)."""
        return None if self.deadline is None else self.deadline + self.request

    def left(self, now: float) -> float | None:
        """Seconds from ``now`` to :attr:`at`, never below 0 (None: no end)."""
        return time_left(self.at, now)
