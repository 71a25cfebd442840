"""Who may take a free lease while others wait: barging, bounded against starvation.

A free lease goes to whoever asks first, so a holder that releases and asks again
keeps it without a wake-up in between (what makes a busy lock fast), **unless** the
oldest live waiter has waited ``bound`` seconds: then only that waiter may take it.
This is Go's ``sync.Mutex`` starvation mode; ``fair=True`` is the bound 0 (FIFO).
The Redis backend runs the same rule in ``acquire.lua``; the memory and SQLite
backends run this function over their queues.

A waiter proves it is alive by asking again at least every ``WAITER_REFRESH``; one
silent for ``WAITER_LIVENESS`` (its process paused or gone) is passed over, so it
cannot hold the lease back from the others for longer than that.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

STARVATION_BOUND = 0.02
WAITER_LIVENESS = 3.0
WAITER_REFRESH = WAITER_LIVENESS / 3

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Waiter(Generic[K]):
    """A queued waiter: ``key`` names it (a doorbell), ``arrived`` is when it queued."""

    key: K
    arrived: float
    alive_until: float


@dataclass(frozen=True)
class Handoff(Generic[K]):
    """What :func:`handoff` decided for one asker."""

    kept_for: Waiter[K] | None  # the waiter a free lease is kept for; None: the asker's
    expired: tuple[K, ...]  # waiters that stopped refreshing, ahead of the first live one

    @property
    def may_take(self) -> bool:
        return self.kept_for is None


def starvation_bound(fair: bool) -> float:
    return 0.0 if fair else STARVATION_BOUND


def handoff(queue: Iterable[Waiter[K]], asker: K | None, now: float, bound: float) -> Handoff[K]:
    """Decide for ``asker`` (its queue key, None if not queued) over ``queue``, oldest first.

    Reads the queue only up to its first live waiter, so a backend can pass a cursor.
    """
    head, expired = oldest_live(queue, now)
    if head is None or head.key == asker or max(now - head.arrived, 0.0) < bound:
        return Handoff(None, expired)
    return Handoff(head, expired)


def oldest_live(queue: Iterable[Waiter[K]], now: float) -> tuple[Waiter[K] | None, tuple[K, ...]]:
    """The first waiter of ``queue`` still alive at ``now``, and the expired ones before it."""
    expired: list[K] = []
    for waiter in queue:
        if waiter.alive_until > now:
            return waiter, tuple(expired)
        expired.append(waiter.key)
    return None, tuple(expired)


def alive_until(now: float) -> float:
    """The liveness deadline a waiter's ask at ``now`` earns it."""
    return now + WAITER_LIVENESS


def busy_wait(holder_remaining: float | None) -> float:
    """How long a queued waiter may wait before asking again: the holder's remaining TTL
    (a release wakes it sooner), but never past its refresh. A free lease kept for an
    older waiter has no TTL (None): the waiter is woken when it is released."""
    if holder_remaining is None:
        return WAITER_REFRESH
    return min(max(holder_remaining, 0.0), WAITER_REFRESH)
