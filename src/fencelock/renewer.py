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
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Generic, TypeVar

from fencelock import clock, forking
from fencelock.aio import TIMEOUTS, stop, within
from fencelock.backends.base import async_batch_renewing, batch_renewing
from fencelock.engine import renewal as plan
from fencelock.lease import AsyncLease, Lease, LeaseBase, arenew_together, renew_together

R = TypeVar("R")

L = TypeVar("L", bound=LeaseBase)


def _carry_out(lease: LeaseBase, step: plan.Next) -> float | None:
    """Mark the lease lost if ``step`` says so; when to look at it again."""
    if step.lost_because is not None:
        lease._expired(step.lost_because)
    return step.due


class DaemonCalls:
    """Each call on a daemon thread of its own (a renewal round now and then).

    Not a ``ThreadPoolExecutor``: Python joins its workers at exit, so a renewal stuck on
    a hung server held up the process's end (``fencelock run`` exited 10-14 s after its
    line). A daemon thread does not; its call is cut off by the backend's bound anyway.
    """

    def submit(self, call: Callable[..., R], *args: Any) -> Future[R]:
        future: Future[R] = Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(call(*args))
            except BaseException as exc:
                future.set_exception(exc)

        threading.Thread(target=run, name="fencelock-renew", daemon=True).start()
        return future


class _Round(Generic[L]):
    """The leases one wake-up of the renewer looks at: those to renew now, and the step
    already decided for the others (past their safe time, or not renewed)."""

    def __init__(self, leases: list[L]) -> None:
        self.leases, self.started = leases, clock.now()
        self.steps = {lease: plan.before_renewal(lease, self.started) for lease in leases}
        self.to_renew = [lease for lease in leases if self.steps[lease] is None]

    @property
    def time_limit(self) -> float:
        """How long their renewal may take: the shortest of theirs."""
        return min(plan.time_limit(lease, self.started) for lease in self.to_renew)

    def renewed(self, outcomes: dict[L, plan.Outcome] | None) -> None:
        """What the renewals came to (None: not within :attr:`time_limit`)."""
        now = clock.now()
        for lease in self.to_renew:
            outcome = None if outcomes is None else outcomes.get(lease)
            self.steps[lease] = plan.after_renewal(lease, self.started, outcome, now)

    def carried_out(self) -> list[tuple[L, float | None]]:
        """Each lease and when to look at it again (losses marked)."""
        dues = []
        for lease in self.leases:
            step = self.steps[lease]
            assert step is not None
            dues.append((lease, _carry_out(lease, step)))
        return dues


def still_to_renew(one: _Round[L]) -> bool:
    """Whether a round of one lease renews it: not if the renewals before it in its
    round took it past its safe time (that step is decided already)."""
    return bool(one.to_renew)


class _RenewerBase(Generic[L]):
    """The schedule and when the driver's current sleep ends, shared by sync and async."""

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
        self._calls = DaemonCalls()
        forking.register(self)

    def _reset_after_fork(self) -> None:
        """In a forked child: no thread yet, fresh locks, and none of the parent's leases."""
        self._start_afresh()
        self._wake = threading.Condition()
        self._thread = None
        # The parent's pool has no threads here; work queued on it would never run.
        self._calls = DaemonCalls()

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

    def _run(self) -> None:
        with self._wake:
            while not self._closed:
                leases = self._schedule.pop_batch(clock.now())
                if not leases:
                    self._wakes_at = self._schedule.wake_at(clock.now())
                    self._wake.wait(max(self._wakes_at - clock.now(), 0.0))
                    self._wakes_at = -math.inf
                    continue
                self._wake.release()
                try:
                    dues = self._service(_Round(leases))
                finally:
                    self._wake.acquire()
                for lease, due in dues:
                    self._schedule.put_back(lease, due)

    def _service(self, leases: _Round[Lease]) -> list[tuple[Lease, float | None]]:
        """Renew the round's leases: together where the backend can, else one by one."""
        if len(leases.to_renew) > 1 and batch_renewing(leases.to_renew[0]._backend):
            together = self._calls.submit(renew_together, leases.to_renew)
            try:
                leases.renewed(together.result(timeout=leases.time_limit))
            except FutureTimeout:
                leases.renewed(None)
            return leases.carried_out()
        for lease in leases.to_renew:
            one = _Round([lease])  # as of now: the renewals before it took time
            if one.to_renew:  # else past its safe time already: that step is decided
                call = self._calls.submit(lease._renew_on_server)
                try:
                    one.renewed({lease: call.result(timeout=one.time_limit)})
                except FutureTimeout:
                    one.renewed(None)
            leases.steps[lease] = one.steps[lease]
        return leases.carried_out()


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
            leases = self._schedule.pop_batch(clock.now())
            if not leases:
                self._wake.clear()
                self._wakes_at = self._schedule.wake_at(clock.now())
                with contextlib.suppress(*TIMEOUTS):
                    await within(self._wakes_at - clock.now(), self._wake.wait())
                self._wakes_at = -math.inf
                continue
            for lease, due in await self._service(_Round(leases)):
                self._schedule.put_back(lease, due)

    async def _service(self, leases: _Round[AsyncLease]) -> list[tuple[AsyncLease, float | None]]:
        """Renew the round's leases: together where the backend can, else one by one.
        Each request runs to its end even if the renewer stops waiting for it."""
        if len(leases.to_renew) > 1 and async_batch_renewing(leases.to_renew[0]._backend):
            together = asyncio.get_running_loop().create_task(arenew_together(leases.to_renew))
            try:
                leases.renewed(await within(leases.time_limit, asyncio.shield(together)))
            except TIMEOUTS:
                leases.renewed(None)
            return leases.carried_out()
        for lease in leases.to_renew:
            one = _Round([lease])  # as of now: the renewals before it took time
            if still_to_renew(one):
                try:
                    outcome = await within(one.time_limit, asyncio.shield(lease._renewal()))
                    one.renewed({lease: outcome})
                except TIMEOUTS:
                    one.renewed(None)
            leases.steps[lease] = one.steps[lease]
        return leases.carried_out()
