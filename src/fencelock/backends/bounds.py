"""Calls to a server that may hang, cut off at the caller's deadline plus one request.

An acquire with a timeout returns within it plus :data:`~fencelock.engine.timing.
REQUEST_BOUND`, and the release of a lease already lost waits no longer than that,
whatever the server does (paused, partitioned, a cluster without a leader). The
asyncio-native backends (every network backend but Redis's blocking face, whose bound
is its socket timeout, and the local ones) are cut off here, in both colours: the
blocking client runs them through :mod:`~fencelock.backends.shared_loop`, which uses
the same :class:`BoundedAttempt`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any, TypeVar

from fencelock import clock
from fencelock.aio import within
from fencelock.backends.base import AsyncAttempt, AttemptResult
from fencelock.engine.timing import REQUEST_BOUND
from fencelock.errors import BackendUnavailable, FencelockError

T = TypeVar("T")

# Past the bound, a backend's own timeout of the same length gets this long to speak
# first: its error says more (which node, which statement) than a cut-off can.
BACKEND_FIRST = 0.25
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


async def bounded(seconds: float | None, awaitable: Awaitable[T], where: str, what: str) -> T:
    """``await awaitable``, cut off after ``seconds`` (None: not cut off) with a
    :class:`BackendUnavailable` naming ``where`` and ``what`` was waited for.

    The cut is a cancellation delivered inside ``awaitable``, where it would land
    without the bound: an attempt's own clean-up (giving back a lease its try took as
    it was cut off) runs as it does for any cancelled acquire.
    """
    if seconds is None:
        return await awaitable
    try:
        return await within(seconds + BACKEND_FIRST, awaitable)
    except TimeoutError as exc:
        raise _no_answer(where, what, seconds) from exc


async def abandoning(seconds: float, awaitable: Awaitable[T], where: str, what: str) -> T:
    """:func:`bounded` for a request whose outcome nobody needs once it is late (a
    renewal past the lease's trust, the release of a lease already lost): cut off, it
    is cancelled and left to end in the background. A driver may take its time over a
    cancellation (psycopg sends the server a cancel request, which a hung server does
    not answer), and a thread of the blocking client must not wait for that."""
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
    task.add_done_callback(_ignore_outcome)
    raise _no_answer(where, what, seconds)


def _no_answer(where: str, what: str, seconds: float) -> BackendUnavailable:
    return BackendUnavailable(
        f"{_server(where)} did not answer {what} within {seconds:.3g}s (the call's time, plus "
        f"{REQUEST_BOUND:g}s for the request in flight)"
    )


def _ignore_outcome(task: asyncio.Future[Any]) -> None:
    """A cut-off request's end: nobody waits for it any more."""
    if not task.cancelled():
        task.exception()


class BoundedAttempt:
    """An :class:`AsyncAttempt` whose calls end by ``deadline`` (a :func:`fencelock.clock.now`
    time; None: no deadline) plus :data:`REQUEST_BOUND`. Once cut off, its close gets
    that long too, and gives up quietly: what it leaves (a waiter's entry) expires."""

    def __init__(self, attempt: AsyncAttempt, where: str, deadline: float | None = None) -> None:
        self._attempt, self._where, self.deadline = attempt, where, deadline
        self._cut_off = False

    @property
    def idle(self) -> bool:
        """Whether the attempt holds nothing on the server (its close sends nothing)."""
        return bool(getattr(self._attempt, "idle", False))

    def _bound(self) -> float | None:
        if self.deadline is None:
            return None
        return max(self.deadline - clock.now(), 0.0) + REQUEST_BOUND

    async def try_acquire(self) -> AttemptResult:
        try:
            return await bounded(self._bound(), self._attempt.try_acquire(), self._where, "a try")
        except BackendUnavailable:
            self._cut_off = True
            raise

    async def wait(self, timeout: float) -> None:
        try:
            await bounded(self._bound(), self._attempt.wait(timeout), self._where, "a wait")
        except BackendUnavailable:
            self._cut_off = True
            raise

    async def close(self) -> None:
        if not self._cut_off:
            await self._attempt.close()
            return
        with contextlib.suppress(FencelockError, TimeoutError):
            await within(REQUEST_BOUND, self._attempt.close())


def alimited(attempt: AsyncAttempt, where: str, deadline: float | None) -> AsyncAttempt:
    """``attempt``, cut off at ``deadline`` (None: as it is) plus one request."""
    return attempt if deadline is None else BoundedAttempt(attempt, where, deadline)
