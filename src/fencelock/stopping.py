"""Stopping the protected work the moment its lease is lost (``stop_on_loss=True``).

asyncio: the task running ``async with lock:`` is cancelled, so whatever it awaits
(and every task of a ``TaskGroup`` inside it) stops; leaving the block raises
:class:`LeaseLost` instead of ``CancelledError``, unless the task was also cancelled
from outside, which stays an ordinary cancellation.

Threads: Python cannot stop a thread safely. On request, :class:`LossInterrupt` (a
``LeaseLost``) is raised in the holding thread at its next bytecode boundary, through
``PyThreadState_SetAsyncExc``. It cannot interrupt a blocking C call (a ``sleep``, a
socket read) until that returns, it may land inside a ``finally`` or a library's
cleanup, and code that catches ``Exception`` broadly swallows it: docs/recovery.md
shows the safer patterns (``lease.check()``, ``lease.lost_event``) first.
"""

from __future__ import annotations

import asyncio
import ctypes
import threading

from fencelock.errors import LeaseLost
from fencelock.lease import AsyncLease, Lease, LeaseBase


class LossInterrupt(LeaseLost):
    """Raised in a thread that holds a lease with ``stop_on_loss=True`` when it is lost."""


def _stopped(lease: LeaseBase) -> LeaseLost:
    return LeaseLost(
        f"lease on {lease.name!r} (token {lease.token}) lost while the block ran: "
        f"{lease.lost_reason}; the block was stopped"
    )


class _Stopper:
    """Armed from entering a ``with`` block until leaving it; fires at most once."""

    def __init__(self, lease: LeaseBase) -> None:
        self._lease = lease
        self._guard = threading.Lock()
        self._armed = True
        self._fired = False

    def _arm_fire(self) -> bool:
        """Whether to stop the work now (armed, not yet fired); it fires only once."""
        with self._guard:
            fire = self._armed and not self._fired
            self._fired = self._fired or fire
            return fire

    def _disarm(self) -> bool:
        """Leaving the block: never fire again; whether it fired."""
        with self._guard:
            self._armed = False
            return self._fired


class TaskStopper(_Stopper):
    """Cancels the task that holds ``lease`` when the lease is lost."""

    def __init__(self, lease: AsyncLease) -> None:
        super().__init__(lease)
        task = asyncio.current_task()
        assert task is not None, "an AsyncLock is entered from a task"
        self._task, loop = task, asyncio.get_running_loop()
        lease.on_lost(lambda _lease: loop.call_soon_threadsafe(self._fire))

    def _fire(self) -> None:
        if self._arm_fire():
            self._task.cancel(f"fencelock: lease on {self._lease.name!r} lost")

    def leaving(self, exc: BaseException | None) -> LeaseLost | None:
        """What leaving the block raises instead of ``exc``: LeaseLost if the loss
        cancelled it (and nothing else did), else None."""
        if not self._disarm() or not isinstance(exc, asyncio.CancelledError):
            return None
        uncancel = getattr(self._task, "uncancel", None)  # Python 3.11+
        if uncancel is not None and uncancel() > 0:  # cancelled from outside too: it stands
            return None
        return _stopped(self._lease)


class ThreadStopper(_Stopper):
    """Raises :class:`LossInterrupt` in the thread that holds ``lease`` when it is lost."""

    def __init__(self, lease: Lease) -> None:
        super().__init__(lease)
        self._thread_id = threading.get_ident()
        lease.on_lost(lambda _lease: self._fire())

    def _fire(self) -> None:
        with self._guard:  # not while leaving: a disarmed stopper never interrupts
            if self._armed and not self._fired:
                self._fired = True
                _raise_in_thread(self._thread_id, LossInterrupt)

    def leaving(self, exc: BaseException | None) -> LeaseLost | None:
        """What leaving the block raises instead of ``exc``: LeaseLost if the loss
        interrupted it, else None (an interrupt not delivered yet is withdrawn)."""
        if not self._disarm():
            return None
        if isinstance(exc, LossInterrupt):
            return _stopped(self._lease)
        _raise_in_thread(self._thread_id, None)
        return None


def _raise_in_thread(thread_id: int, exc_type: type[BaseException] | None) -> None:
    """Have ``exc_type`` raised in a thread at its next bytecode boundary (None: withdraw)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exc_type) if exc_type else None
    )
