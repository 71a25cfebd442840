"""One renewer per client keeps every held lease alive: a heap of deadlines.

The sync client runs it on one daemon thread, the asyncio client as one task;
never a thread per lock. What to do at each deadline (renew, retry, declare the
lease lost) is decided by :mod:`fencelock.engine.renewal` and the lease state
table; only the waiting and the renew call differ between the two colours.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import math
import threading
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Generic, TypeVar

from fencelock import clock, forking
from fencelock.backends.base import AsyncBackend, Backend
from fencelock.engine import renewal as plan
from fencelock.engine.lease_state import is_live
from fencelock.lease import AsyncLease, Lease, LeaseBase, Outcome

L = TypeVar("L", bound=LeaseBase)


# (due, sequence number, schedule version, lease): plain tuples, compared in C; the
# unique sequence number means the lease itself is never compared.
_Entry = tuple[float, int, int, L]


class Schedule(Generic[L]):
    """Deadlines of held leases; a reschedule or a release makes the older entry stale.

    Stale entries are dropped lazily, and all at once when they outnumber the live
    ones, so a client that takes and releases leases quickly keeps a small heap.
    """

    def __init__(self) -> None:
        self._heap: list[_Entry[L]] = []
        self._seq = itertools.count()
        self._compact_at = 1024

    def put(self, lease: L, due: float) -> None:
        lease.schedule_version += 1
        if len(self._heap) >= self._compact_at:
            self._compact()
        heapq.heappush(self._heap, (due, next(self._seq), lease.schedule_version, lease))

    def _compact(self) -> None:
        self._heap = [entry for entry in self._heap if self._current(entry)]
        heapq.heapify(self._heap)
        self._compact_at = max(1024, 2 * len(self._heap))

    def next_due(self) -> float | None:
        while self._heap and not self._current(self._heap[0]):
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: float) -> L | None:
        due = self.next_due()
        if due is None or due > now:
            return None
        return heapq.heappop(self._heap)[3]

    def __len__(self) -> int:
        return len(self._heap)

    @staticmethod
    def _current(entry: _Entry[L]) -> bool:
        lease = entry[3]
        return entry[2] == lease.schedule_version and is_live(lease.state)


# With no lease held, the renewer still wakes this often. Sleeping "forever" instead
# would make the next acquire wake it (its deadline is earlier than forever), and a
# client that takes and releases one lease at a time would wake it on every acquire.
IDLE_TICK = 1.0


def sleep_until(schedule: Schedule[L], now: float) -> float:
    """When the renewer should wake next: the first live deadline, or one idle tick."""
    due = schedule.next_due()
    return now + IDLE_TICK if due is None else due


def first_due(lease: LeaseBase, started: float) -> float:
    return plan.next_check(started, lease.ttl, lease.trusted_until, lease.renews)


def needs_renewal(lease: LeaseBase, now: float) -> bool:
    """False when the lease is past its safe time (now marked lost) or never renews."""
    if now >= lease.trusted_until:
        lease._expired("not renewed within its TTL (process paused?)")
        return False
    return lease.renews


def after_renewal(lease: LeaseBase, started: float, outcome: Outcome | None) -> float | None:
    """The next deadline after a renewal the lease has settled, or None once it is lost.

    ``outcome=None``: the renewal did not finish within the lease's safe time.
    """
    if outcome is None and clock.now() >= lease.trusted_until:
        lease._expired("its renewal did not finish within the lease's safe time")
    if outcome is False or not is_live(lease.state):
        return None
    if outcome is True:
        return plan.next_check(started, lease.ttl, lease.trusted_until, lease.renews)
    return plan.retry_at(clock.now(), lease.ttl, lease.trusted_until)


class Renewer:
    """Renews the sync client's leases on one daemon thread."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._schedule: Schedule[Lease] = Schedule()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._wakes_at = -math.inf  # when the thread's current sleep ends (-inf: awake)
        # Renew calls run here so a call stuck on a hung server can be abandoned.
        self._calls = ThreadPoolExecutor(max_workers=4, thread_name_prefix="fencelock-renew")
        forking.register(self)

    def _reset_after_fork(self) -> None:
        """In a forked child: no thread yet, fresh locks, and none of the parent's leases."""
        self._schedule = Schedule()
        self._wake = threading.Condition()
        self._thread = None
        self._wakes_at = -math.inf
        # The parent's pool has no threads here; work queued on it would never run.
        self._calls = ThreadPoolExecutor(max_workers=4, thread_name_prefix="fencelock-renew")

    def track(self, lease: Lease) -> None:
        with self._wake:
            due = first_due(lease, clock.now())
            self._schedule.put(lease, due)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="fencelock-renewer", daemon=True
                )
                self._thread.start()
            elif due < self._wakes_at:
                # Wake the thread only if it sleeps past the new deadline: a thread
                # switch on every acquire would cost more than the acquire itself.
                self._wake.notify()

    def forget(self, lease: Lease) -> None:
        with self._wake:
            lease.schedule_version += 1

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self._calls.shutdown(wait=False, cancel_futures=True)

    def _run(self) -> None:
        with self._wake:
            while not self._closed:
                lease = self._schedule.pop_due(clock.now())
                if lease is None:
                    self._wakes_at = sleep_until(self._schedule, clock.now())
                    self._wake.wait(max(self._wakes_at - clock.now(), 0.0))
                    self._wakes_at = -math.inf
                    continue
                self._wake.release()
                try:
                    due = self._service(lease)
                finally:
                    self._wake.acquire()
                if due is not None and is_live(lease.state):
                    self._schedule.put(lease, due)

    def _service(self, lease: Lease) -> float | None:
        started = clock.now()
        if not needs_renewal(lease, started):
            return None if lease.lost else lease.trusted_until
        call = self._calls.submit(lease._renew_on_server)
        outcome: Outcome | None
        try:
            # A hung server must not hold the loss back past the lease's safe time.
            outcome = call.result(timeout=max(lease.trusted_until - started, 0.0))
        except FutureTimeout:
            outcome = None
        return after_renewal(lease, started, outcome)


class AsyncRenewer:
    """Renews the asyncio client's leases in one task."""

    def __init__(self, backend: AsyncBackend) -> None:
        self._backend = backend
        self._schedule: Schedule[AsyncLease] = Schedule()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._wakes_at = -math.inf  # when the task's current sleep ends (-inf: awake)
        forking.register(self)

    def _reset_after_fork(self) -> None:
        """In a forked child: none of the parent's leases, and a task made on first use."""
        forking.abandon(self._task)  # with the parent's loop: never finalized here
        self._schedule = Schedule()
        self._wake = asyncio.Event()
        self._task = None
        self._wakes_at = -math.inf

    def track(self, lease: AsyncLease) -> None:
        due = first_due(lease, clock.now())
        self._schedule.put(lease, due)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())
        elif due < self._wakes_at:  # as Renewer.track: wake it only if it would oversleep
            self._wake.set()

    def forget(self, lease: AsyncLease) -> None:
        lease.schedule_version += 1

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            lease = self._schedule.pop_due(clock.now())
            if lease is None:
                self._wake.clear()
                self._wakes_at = sleep_until(self._schedule, clock.now())
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self._wakes_at - clock.now())
                self._wakes_at = -math.inf
                continue
            due = await self._service(lease)
            if due is not None and is_live(lease.state):
                self._schedule.put(lease, due)

    async def _service(self, lease: AsyncLease) -> float | None:
        started = clock.now()
        if not needs_renewal(lease, started):
            return None if lease.lost else lease.trusted_until
        outcome: Outcome | None
        try:
            outcome = await asyncio.wait_for(
                asyncio.shield(lease._renewal()), max(lease.trusted_until - started, 0.0)
            )
        except asyncio.TimeoutError:
            outcome = None
        return after_renewal(lease, started, outcome)
