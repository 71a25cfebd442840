"""Calls to a server that may hang, cut off at the caller's deadline plus one request.

An acquire with a timeout returns within it plus one request's time (the URL's
``request_bound`` option, :data:`~fencelock.engine.timing.REQUEST_BOUND` by default),
and the release of a lease already lost waits no longer than that, whatever the
server does (paused, partitioned, a cluster without a leader). The
asyncio-native backends are cut off here, in sync and async: the blocking client runs
them through :mod:`~fencelock.backends.shared_loop`, which uses the same
:class:`BoundedAttempt`. A blocking driver (Redis's, a stepped request) reads
:func:`~fencelock.blocking_call.time_left` and cuts its own waits to it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, NoReturn, TypeVar

from fencelock import blocking_call, clock
from fencelock.aio import TIMEOUTS, within_or_recancel
from fencelock.backends.base import AsyncAttempt, AttemptResult
from fencelock.blocking_call import CallEnded
from fencelock.engine.deadline import CallEnd
from fencelock.engine.timing import REQUEST_BOUND
from fencelock.errors import BackendUnavailable

T = TypeVar("T")

# Requests cut off or left to finish in the background (see _leave_running).
_LEFT_RUNNING: set[asyncio.Future[Any]] = set()
_KINDS = {
    "redis": "Redis",
    "rediss": "Redis",
    "redlock": "Redlock",
    "etcd": "etcd",
    "etcds": "etcd",
    "zookeeper": "ZooKeeper",
    "postgresql": "PostgreSQL",
    "postgres": "PostgreSQL",
    "mysql": "MySQL",
    "mariadb": "MySQL",
}


def _server(where: str) -> str:
    """``where`` (a redacted URL) with the kind of server it names before it."""
    scheme = where.split("://", 1)[0].split("+", 1)[0].lower()
    kind = _KINDS.get(scheme)
    return f"{kind} at {where}" if kind else where


async def bounded(
    seconds: float | None,
    awaitable: Awaitable[T],
    where: str,
    what: str,
    bound: float = REQUEST_BOUND,
) -> T:
    """``await awaitable``, cut off after ``seconds`` (None: not cut off) with a
    :class:`BackendUnavailable` naming ``where`` and ``what`` was waited for
    (``seconds`` is the caller's time left plus ``bound``, which the message names).

    The cut is a cancellation delivered inside ``awaitable``, where it would land
    without the bound: an attempt's own clean-up (giving back a lease its try took as
    it was cut off) runs as it does for any cancelled acquire, and a lease granted
    as the caller is cancelled is never dropped between two tasks. A clean-up that
    waits on the hung server is cancelled again (:func:`~fencelock.aio.within_or_recancel`).
    """
    if seconds is None:
        return await awaitable
    await blocking_call.onto_the_loop()
    try:
        return await within_or_recancel(seconds, awaitable)
    except TIMEOUTS as exc:
        raise _no_answer(where, what, seconds, bound) from exc


async def bounded_or_detach(
    seconds: float, awaitable: Awaitable[T], where: str, what: str, bound: float = REQUEST_BOUND
) -> T:
    """:func:`bounded` for a request whose outcome nobody needs once it is late (a
    renewal past the lease's trust, the release of a lease already lost): cut off, it
    is cancelled and left to end in the background, in a task of its own, as a thread
    of the blocking client must not wait for a driver's clean-up."""
    await blocking_call.onto_the_loop()
    task = asyncio.ensure_future(awaitable)
    try:
        done, _ = await asyncio.wait({task}, timeout=seconds)
    except asyncio.CancelledError:
        task.cancel()
        await asyncio.wait({task})
        raise
    if done:
        return task.result()
    task.cancel()
    _leave_running(task)
    raise _no_answer(where, what, seconds, bound)


def _leave_running(task: asyncio.Future[Any]) -> None:
    """Let ``task`` end in the background, quietly: kept here until it does, as asyncio
    holds a task only weakly."""
    _LEFT_RUNNING.add(task)
    task.add_done_callback(_LEFT_RUNNING.discard)
    task.add_done_callback(_ignore_outcome)


def _no_answer(where: str, what: str, seconds: float, bound: float) -> BackendUnavailable:
    return BackendUnavailable(
        f"{_server(where)} did not answer {what} within {seconds:.3g}s (the call's time, plus "
        f"{bound:g}s for the request in flight: the URL's request_bound option)"
    )


def _ignore_outcome(task: asyncio.Future[Any]) -> None:
    """A cut-off request's end: nobody waits for it any more."""
    if not task.cancelled():
        task.exception()


class BoundedAttempt:
    """An :class:`AsyncAttempt` whose calls end by ``deadline`` (a :func:`fencelock.clock.now`
    time; None: no deadline) plus ``bound`` (one request's time). Once cut off, its close
    takes none of the caller's time past that: it is sent, and goes on in the background
    (a server merely slow still hears it; what a hung one keeps, a waiter's entry, expires
    with its session)."""

    def __init__(self, attempt: AsyncAttempt, where: str, end: CallEnd) -> None:
        self._attempt, self._where, self.end = attempt, where, end
        self._cut_off = False

    @property
    def idle(self) -> bool:
        """Whether the attempt holds nothing on the server (its close sends nothing)."""
        return bool(getattr(self._attempt, "idle", False))

    def _bound(self) -> float | None:
        return self.end.left(clock.now())

    @property
    def inner(self) -> AsyncAttempt:
        """The attempt, unbounded (for a caller that bounds it by :meth:`ends_at`)."""
        return self._attempt

    async def try_acquire(self) -> AttemptResult:
        return await self.bounding(self._attempt.try_acquire(), "a try")

    async def wait(self, timeout: float) -> None:
        await self.bounding(self._attempt.wait(timeout), "a wait")

    async def bounding(self, call: Awaitable[T], what: str) -> T:
        """``call`` (one of this attempt's), cut off at the deadline plus one request."""
        try:
            return await bounded(self._bound(), call, self._where, what, self.end.request)
        except BackendUnavailable:
            self._cut_off = True
            raise

    def cut_off(self, what: str, given: float | None, failure: BackendUnavailable) -> NoReturn:
        """A call of the attempt's (``what``, given ``given`` seconds) failed elsewhere
        (stepped): :meth:`close` as if here, and raise as :meth:`bounding` would."""
        self._cut_off = True
        if isinstance(failure, CallEnded) and given is not None:
            raise _no_answer(self._where, what, given, self.end.request) from failure
        raise failure

    async def close(self) -> None:
        if not self._cut_off:
            await self._attempt.close()
            return
        await blocking_call.onto_the_loop()  # a close left running needs the loop
        closing = asyncio.ensure_future(self._attempt.close())
        _leave_running(closing)
        await asyncio.wait({closing}, timeout=0)  # sent; the caller's time is already up


def alimited(attempt: AsyncAttempt, where: str, end: CallEnd) -> AsyncAttempt:
    """``attempt``, cut off at ``end`` (one with no deadline: as it is)."""
    return attempt if end.deadline is None else BoundedAttempt(attempt, where, end)
