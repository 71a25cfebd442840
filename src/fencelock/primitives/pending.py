"""The acquires of one lock object under way, so that ``lock.cancel()`` can end them
from any thread or task (kazoo's ``Lock.cancel``).

A blocking acquire is told by a flag, read by its driver before each try and around
each wait, and woken from its wait by the attempt's ``interrupt()``. An asyncio acquire
is its task, cancelled on its own loop only while it is still acquiring, so the
cancellation can never land in the caller's code after the acquire returned.
No mutex: a set's add, discard and copy are each atomic under the GIL, so nothing
here needs resetting after ``fork()``.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from fencelock.errors import AcquireCancelled


class Interruptible(Protocol):
    def interrupt(self) -> None:
        """Make the wait under way (or the next one) return now; from any thread."""


class BlockingAcquire:
    """One blocking acquire under way: ``requested`` once cancelled."""

    __slots__ = ("attempt", "name", "requested")

    def __init__(self, attempt: Interruptible, name: str) -> None:
        self.attempt, self.name, self.requested = attempt, name, False

    def cancelled(self) -> AcquireCancelled:
        return _cancelled(self.name)


class TaskAcquire:
    """One asyncio acquire under way: its task, and whether ``cancel()`` cancelled it."""

    __slots__ = ("loop", "requested", "task")

    def __init__(self, task: asyncio.Task[object], loop: asyncio.AbstractEventLoop) -> None:
        self.task, self.loop, self.requested = task, loop, False


def _cancelled(name: str) -> AcquireCancelled:
    return AcquireCancelled(f"acquire of lock {name!r} cancelled (lock.cancel())")


class PendingAcquires:
    """The acquires of one lock object that have not yet got the lock nor given up."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._blocking: set[BlockingAcquire] = set()
        self._tasks: set[TaskAcquire] = set()

    def blocking(self, attempt: Interruptible) -> BlockingAcquire:
        """Count a blocking acquire in (:meth:`done` counts it out)."""
        pending = BlockingAcquire(attempt, self._name)
        self._blocking.add(pending)
        return pending

    def task(self) -> TaskAcquire:
        """Count the current task's acquire in (:meth:`task_done` counts it out)."""
        task = asyncio.current_task()
        assert task is not None, "an asyncio acquire runs in a task"
        pending = TaskAcquire(task, asyncio.get_running_loop())
        self._tasks.add(pending)
        return pending

    def done(self, pending: BlockingAcquire) -> None:
        self._blocking.discard(pending)

    def task_done(self, pending: TaskAcquire) -> None:
        self._tasks.discard(pending)

    def cancelled(self) -> AcquireCancelled:
        return _cancelled(self._name)

    def cancel(self) -> None:
        """End every acquire under way now; each raises :class:`AcquireCancelled`."""
        for pending in tuple(self._blocking):
            pending.requested = True
            pending.attempt.interrupt()
        for waiting in tuple(self._tasks):
            waiting.loop.call_soon_threadsafe(self._cancel_task, waiting)

    def _cancel_task(self, pending: TaskAcquire) -> None:
        """On the task's loop: cancel it if it is still acquiring."""
        if pending in self._tasks and not pending.task.done():
            pending.requested = True
            pending.task.cancel()

    @staticmethod
    def uncancel(pending: TaskAcquire) -> None:
        """After a cancellation of ours was caught: the task is not being cancelled."""
        uncancel = getattr(pending.task, "uncancel", None)  # Python 3.11 on
        if uncancel is not None:
            uncancel()
