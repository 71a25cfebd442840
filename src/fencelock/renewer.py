"""One renewer per client keeps every held lease alive: the two drivers.

The sync client's renewer runs on one daemon thread, the asyncio client's as one
task; never a thread per lock. Every decision (the heap of deadlines, when a lease
is due, renew or call it lost, what to do after a renewal's outcome) is made by
:mod:`fencelock.engine.renewal`; the drivers here only wait and send, as the two
drivers of the acquire flow in :mod:`fencelock.primitives.lock` do.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Generic, TypeVar

from fencelock import clock, forking
from fencelock.aio import stop, within
from fencelock.engine import renewal as plan
from fencelock.lease import AsyncLease, Lease, LeaseBase

L = TypeVar("L", bound=LeaseBase)


def _carry_out(lease: LeaseBase, step: plan.Next) -> float | None:
    """Mark the lease lost if ``step`` says so; when to look at it again."""
    if step.lost_because is not None:
        lease._expired(step.lost_because)
    return step.due


class _RenewerBase(Generic[L]):
    """The schedule and when the driver's current sleep ends, shared by both colours."""

    def __init__(self) -> None:
        self._schedule: plan.Schedule[L]
        self._wakes_at: float
        self._start_afresh()

    def _start_afresh(self) -> None:
        """No lease scheduled, and the driver awake (also in a forked child)."""
        self._schedule = plan.Schedule()
        self._wakes_at = -math.inf  # when the driver's current sleep ends (-inf: awake)

    def _put_new(self, lease: L) -> bool:
        """Schedule a lease granted or extended now; whether the driver must wake for it.

        Only if it sleeps past the new deadline: a thread switch on every acquire
        would cost more than the acquire itself.
        """
        due = plan.first_due(lease, clock.now())
        self._schedule.put(lease, due)
        return due < self._wakes_at


class Renewer(_RenewerBase[Lease]):
    """Renews the sync client's leases on one daemon thread."""

    def __init__(self) -> None:
        super().__init__()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        # Renew calls run here so a call stuck on a hung server can be abandoned.
        self._calls = ThreadPoolExecutor(max_workers=4, thread_name_prefix="fencelock-renew")
        forking.register(self)

    def _reset_after_fork(self) -> None:
        """In a forked child: no thread yet, fresh locks, and none of the parent's leases."""
        self._start_afresh()
        self._wake = threading.Condition()
        self._thread = None
        # The parent's pool has no threads here; work queued on it would never run.
        self._calls = ThreadPoolExecutor(max_workers=4, thread_name_prefix="fencelock-renew")

    def track(self, lease: Lease) -> None:
        with self._wake:
            wake = self._put_new(lease)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="fencelock-renewer", daemon=True
                )
                self._thread.start()
            elif wake:
                self._wake.notify()

    def forget(self, lease: Lease) -> None:
        with self._wake:
            self._schedule.forget(lease)

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
                    self._wakes_at = self._schedule.wake_at(clock.now())
                    self._wake.wait(max(self._wakes_at - clock.now(), 0.0))
                    self._wakes_at = -math.inf
                    continue
                self._wake.release()
                try:
                    due = self._service(lease)
                finally:
                    self._wake.acquire()
                self._schedule.put_back(lease, due)

    def _service(self, lease: Lease) -> float | None:
        started = clock.now()
        step = plan.before_renewal(lease, started)
        if step is None:
            call = self._calls.submit(lease._renew_on_server)
            outcome: plan.Outcome | None
            try:
                outcome = call.result(timeout=plan.time_limit(lease, started))
            except FutureTimeout:
                outcome = None
            step = plan.after_renewal(lease, started, outcome, clock.now())
        return _carry_out(lease, step)


class AsyncRenewer(_RenewerBase[AsyncLease]):
    """Renews the asyncio client's leases in one task."""

    def __init__(self) -> None:
        super().__init__()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        forking.register(self)

    def _reset_after_fork(self) -> None:
        """In a forked child: none of the parent's leases, and a task made on first use."""
        forking.abandon(self._task)  # with the parent's loop: never finalized here
        self._start_afresh()
        self._wake = asyncio.Event()
        self._task = None

    def track(self, lease: AsyncLease) -> None:
        wake = self._put_new(lease)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())
        elif wake:
            self._wake.set()

    def forget(self, lease: AsyncLease) -> None:
        self._schedule.forget(lease)

    async def close(self) -> None:
        if self._task is not None:
            await stop(self._task)
            self._task = None

    async def _run(self) -> None:
        while True:
            lease = self._schedule.pop_due(clock.now())
            if lease is None:
                self._wake.clear()
                self._wakes_at = self._schedule.wake_at(clock.now())
                with contextlib.suppress(asyncio.TimeoutError):
                    await within(self._wakes_at - clock.now(), self._wake.wait())
                self._wakes_at = -math.inf
                continue
            self._schedule.put_back(lease, await self._service(lease))

    async def _service(self, lease: AsyncLease) -> float | None:
        started = clock.now()
        step = plan.before_renewal(lease, started)
        if step is None:
            outcome: plan.Outcome | None
            try:
                outcome = await within(
                    plan.time_limit(lease, started), asyncio.shield(lease._renewal())
                )
            except asyncio.TimeoutError:
                outcome = None
            step = plan.after_renewal(lease, started, outcome, clock.now())
        return _carry_out(lease, step)
