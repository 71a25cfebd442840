"""How long a lease may be trusted after a renew or extend request, whatever came back.

Requests for one lease go out one at a time, so the server applies the answered ones
in the order they were sent. A request whose answer never came (an error, a timeout,
a cancelled caller) may still be applied later, even after a later request: its TTL
then bounds every grant that follows. Trust never exceeds what the server granted.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from fencelock.engine import timing


class Trust(NamedTuple):
    """``until``: the end of the safe time. ``ttl_floor``: the shortest TTL of a
    request that may still land (``inf`` when every request was answered).
    ``hold_until``: the lease's ``max_hold`` deadline, past which nothing is trusted."""

    until: float
    ttl_floor: float = math.inf
    hold_until: float = math.inf


def sending(trust: Trust, started: float, ttl: float) -> Trust:
    """A request to leave the lease ``ttl`` from about now goes out at ``started``: the
    server may apply it the moment it arrives, before its answer is read, so until then
    trust no more than it leaves (an extend to a shorter TTL lowers trust at once)."""
    return trust._replace(until=min(trust.until, timing.trusted_until(started, ttl)))


def granted(trust: Trust, started: float, ttl: float) -> Trust:
    """The server extended the lease by ``ttl`` in a request sent at ``started``.

    An unanswered request applied after this one would leave the lease at least
    ``ttl_floor`` from now, and now is later than ``started``.
    """
    until = timing.trusted_until(started, min(ttl, trust.ttl_floor))
    return trust._replace(until=min(until, trust.hold_until))


def unanswered(trust: Trust, started: float, ttl: float) -> Trust:
    """A request sent at ``started`` with ``ttl`` got no answer: it may apply at any time.

    Applied, it leaves the lease at least ``ttl`` past ``started``, perhaps less
    than the trust held so far (an extend to a shorter TTL), so take the minimum.
    """
    until = min(trust.until, timing.trusted_until(started, ttl))
    return trust._replace(until=until, ttl_floor=min(trust.ttl_floor, ttl))


def held_too_long(trust: Trust, now: float) -> bool:
    """Whether the lease ends because it reached its ``max_hold``, not its TTL."""
    return now >= trust.hold_until
