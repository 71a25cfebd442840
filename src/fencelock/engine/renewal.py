"""The renewer's decisions, with no I/O and no clock reads (time is passed in).

When a lease is first due, what to do at its deadline (renew it, call it lost, or
just look again later), what to do after a renewal came to an outcome, how long a
renewal may take, and the heap of deadlines with its wake-up time. The renewer's
two drivers (:mod:`fencelock.renewer`: a thread, a task) only wait and send.

A lease is seen through :class:`Renewable`, so this module needs no lease class.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from fencelock.engine.lease_state import LeaseState, is_live
from fencelock.engine.outcomes import RenewedAsOf
from fencelock.errors import FencelockError

# A failed renewal is retried this often (as a fraction of the TTL) ...
RETRY_FRACTION = 0.1
# ... but never more often than this.
MIN_RETRY = 0.02
# When the renewer wakes for a lease, it takes along every lease due within this share
# of its own TTL, up to BATCH_LIMIT, and a backend that renews many in one request
# (redis, sqlite, postgresql, etcd, zookeeper, memory) gets them together. Renewed
# together, they are due together again: leases taken at scattered moments fall into
# step after one round, and 10,000 leases cost a few requests a round, not 10,000.
COALESCE_FRACTION = 0.05
BATCH_LIMIT = 1000
# With no lease held, the renewer still wakes this often. Sleeping "forever" instead
# would make the next acquire wake it (its deadline is earlier than forever), and a
# client that takes and releases one lease at a time would wake it on every acquire.
IDLE_TICK = 1.0

# What a renew or extend request came to: True (granted from when it was sent),
# RenewedAsOf (granted from an earlier time: a shared session's keepalive), False
# (another owner has it), or the error that left its outcome unknown.
Outcome = bool | RenewedAsOf | FencelockError


class Renewable(Protocol):
    """What the decisions read of a lease."""

    @property
    def ttl(self) -> float:
        """The TTL it is renewed by."""

    @property
    def renews(self) -> bool:
        """False for a plain TTL lease, which is only watched until its safe time ends."""

    @property
    def trusted_until(self) -> float:
        """The end of its safe time."""

    @property
    def state(self) -> LeaseState:
        """Where it is in the lease state table."""


R = TypeVar("R", bound=Renewable)


@dataclass(frozen=True)
class Next:
    """What becomes of a lease the renewer looked at.

    ``due``: when to look at it again (None: drop it from the schedule);
    ``lost_because``: if set, mark it lost for this reason first.
    """

    due: float | None
    lost_because: str | None = None


def renew_at(started: float, ttl: float) -> float:
    """Renew at about a third of the TTL: two more tries fit before it runs out."""
    return started + ttl / 3


def retry_at(now: float, ttl: float, trusted_until: float) -> float:
    """After a failed renewal: soon, but not past the end of the safe time."""
    return min(now + max(ttl * RETRY_FRACTION, MIN_RETRY), trusted_until)


def next_check(started: float, ttl: float, trusted_until: float, renew: bool) -> float:
    """The next time the renewer must look at a lease granted or renewed at ``started``:
    to renew it, or when its safe time ends (sooner than renewal under ``max_hold``)."""
    return min(renew_at(started, ttl), trusted_until) if renew else trusted_until


def first_due(lease: Renewable, started: float) -> float:
    """When the renewer first looks at a lease granted or extended at ``started``."""
    return next_check(started, lease.ttl, lease.trusted_until, lease.renews)


def before_renewal(lease: Renewable, now: float) -> Next | None:
    """At a lease's deadline: None to renew it now, else what to do instead.

    Past its safe time (the process was paused) it is lost; a lease that is not
    renewed is looked at again when its safe time ends.
    """
    if now >= lease.trusted_until:
        return Next(None, "not renewed within its TTL (process paused?)")
    if not lease.renews:
        return Next(lease.trusted_until)
    return None


def time_limit(lease: Renewable, started: float) -> float:
    """How long a renewal sent at ``started`` may take: a hung server must not hold
    the loss back past the lease's safe time."""
    return max(lease.trusted_until - started, 0.0)


def after_renewal(lease: Renewable, started: float, outcome: Outcome | None, now: float) -> Next:
    """What to do once the lease has settled a renewal sent at ``started``.

    ``outcome=None``: the renewal did not finish within :func:`time_limit`. A renewal
    granted is renewed again at a third of the TTL; one that failed is retried soon.
    """
    if outcome is None and now >= lease.trusted_until:
        return Next(None, "its renewal did not finish within the lease's safe time")
    if outcome is False or not is_live(lease.state):
        return Next(None)
    if outcome is True:
        return Next(next_check(started, lease.ttl, lease.trusted_until, lease.renews))
    if isinstance(outcome, RenewedAsOf):  # in step with the session's keepalives
        due = next_check(outcome.at, lease.ttl, lease.trusted_until, lease.renews)
        return Next(max(due, now + MIN_RETRY))
    return Next(retry_at(now, lease.ttl, lease.trusted_until))


class Schedule(Generic[R]):
    """Deadlines of held leases; a reschedule or a :meth:`forget` makes the older entry stale.

    Each lease has at most one current entry, the latest put. Stale entries are
    dropped lazily, and all at once when they outnumber the live ones, so a client
    that takes and releases leases quickly keeps a small heap.
    """

    def __init__(self) -> None:
        # (due, sequence number, lease): plain tuples, compared in C; the unique
        # sequence number means the lease itself is never compared.
        self._heap: list[tuple[float, int, R]] = []
        self._latest: dict[R, int] = {}  # lease -> sequence number of its current entry
        self._seq = itertools.count()
        self._compact_at = 1024

    def put(self, lease: R, due: float) -> None:
        """Look at ``lease`` at ``due`` (instead of when it was due before)."""
        if len(self._heap) >= self._compact_at:
            self._compact()
        seq = next(self._seq)
        self._latest[lease] = seq
        heapq.heappush(self._heap, (due, seq, lease))

    def put_back(self, lease: R, due: float | None) -> None:
        """After looking at ``lease``: again at ``due``, if any and if it is still live."""
        if due is not None and is_live(lease.state):
            self.put(lease, due)

    def forget(self, lease: R) -> None:
        """Never look at ``lease`` again (unless it is put again)."""
        self._latest.pop(lease, None)

    def next_due(self) -> float | None:
        """The first deadline of a live lease, or None."""
        heap = self._heap
        while heap and not self._current(heap[0]):
            _, seq, lease = heapq.heappop(heap)
            if self._latest.get(lease) == seq:  # current, but no longer live
                del self._latest[lease]
        return heap[0][0] if heap else None

    def pop_batch(self, now: float, limit: int = BATCH_LIMIT) -> list[R]:
        """The leases due by ``now``, and with them those due within
        :data:`COALESCE_FRACTION` of their TTL from ``now``; at most ``limit``, the
        first due first. Empty if none is due by ``now``."""
        due = self.next_due()
        if due is None or due > now:
            return []
        batch: list[R] = []
        while len(batch) < limit:
            due = self.next_due()
            if due is None or due > now + COALESCE_FRACTION * self._heap[0][2].ttl:
                break
            lease = heapq.heappop(self._heap)[2]
            del self._latest[lease]
            batch.append(lease)
        return batch

    def wake_at(self, now: float) -> float:
        """When the renewer should wake next: the first live deadline, or one idle tick."""
        due = self.next_due()
        return now + IDLE_TICK if due is None else due

    def _compact(self) -> None:
        self._heap = [entry for entry in self._heap if self._current(entry)]
        heapq.heapify(self._heap)
        self._latest = {lease: seq for _, seq, lease in self._heap}
        self._compact_at = max(1024, 2 * len(self._heap))

    def _current(self, entry: tuple[float, int, R]) -> bool:
        lease = entry[2]
        return self._latest.get(lease) == entry[1] and is_live(lease.state)
