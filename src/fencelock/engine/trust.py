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
    request that may still land (``inf`` when every request was answered)."""

    until: float
    ttl_floor: float = math.inf


def granted(trust: Trust, started: float, ttl: float) -> Trust:
    """The server extended the lease by ``ttl`` in a request sent at ``started``.

    An unanswered request applied after this one would leave the lease at least
    ``ttl_floor`` from now, and now is later than ``started``.
    """
    return Trust(timing.trusted_until(started, min(ttl, trust.ttl_floor)), trust.ttl_floor)


def unanswered(trust: Trust, started: float, ttl: float) -> Trust:
    """A request sent at ``started`` with ``ttl`` got no answer: it may apply at any time.

    Applied, it leaves the lease at least ``ttl`` past ``started``, perhaps less
    than the trust held so far (an extend to a shorter TTL), so take the minimum.
    """
    return Trust(min(trust.until, timing.trusted_until(started, ttl)), min(trust.ttl_floor, ttl))
