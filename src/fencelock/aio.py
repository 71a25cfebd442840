"""asyncio waits that never lose a cancellation: a deadline, and stopping a task.

Before Python 3.12, ``asyncio.wait_for`` returns the awaited result instead of
raising when the cancellation lands in the same loop turn as that result: the
task carries on as if never cancelled. A renewer task whose wake-up event was set
as its client closed did exactly that and ran forever, so the close never
returned. fencelock waits with :func:`within` and stops tasks with :func:`stop`.

Drivers still use ``wait_for`` inside (redis.asyncio bounds every write with it when
a socket timeout is set, and a write's drain is usually done at once): a cancelled
``acquire()`` went on waiting for the lock, 40 times in 100 when cancelled as it
subscribed. So :func:`within` and :func:`within_or_recancel` look, once the awaited call is
back, whether a cancellation asked meanwhile was swallowed, and raise it.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from fencelock import blocking_call

T = TypeVar("T")
F = TypeVar("F", bound="asyncio.Future[Any]")

# What a deadline raises: before Python 3.11, asyncio's TimeoutError is not the
# builtin one, and drivers raise either. Catch both with ``except TIMEOUTS``.
TIMEOUTS: tuple[type[Exception], ...] = (TimeoutError, asyncio.TimeoutError)

# How long a stopped task may go on before it is cancelled again.
RECANCEL_AFTER = 0.05

if sys.version_info >= (3, 11):

    def _cancelling() -> int:
        task = asyncio.current_task()
        assert task is not None, "awaited in a task"
        return task.cancelling()

    def _raise_swallowed(before: int) -> None:
        """Raise the cancellation asked since ``before`` that a driver swallowed."""
        if _cancelling() > before:
            raise asyncio.CancelledError

    async def _within(seconds: float | None, awaitable: Awaitable[T]) -> T:
        before = _cancelling()
        async with asyncio.timeout(seconds):
            result = await awaitable
        _raise_swallowed(before)
        return result

else:  # pragma: no cover - Python 3.10: no asyncio.timeout, no Task.cancelling

    async def _within(seconds: float | None, awaitable: Awaitable[T]) -> T:
        return await _cut_off(seconds, awaitable, recancel=None)


async def within(seconds: float | None, awaitable: Awaitable[T]) -> T:
    """Await with a deadline (:class:`TimeoutError` past it); no extra task (from Python
    3.11). A cancellation the awaited call swallowed is raised once it is back. In a
    stepped call (:mod:`fencelock.blocking_call`), the request inside bounds its wait."""
    if blocking_call.active():
        return await blocking_call.within(seconds, awaitable, _within)
    return await _within(seconds, awaitable)


async def opened_within(
    seconds: float | None, opening: Awaitable[T], close: Callable[[T], object]
) -> T:
    """:func:`within` for a call that opens something (a connection): what it opened is
    the caller's, or closed with ``close`` when the caller does not get it (cancelled
    as the call returned, the result is dropped for the cancellation; left to the
    garbage collector, a socket is closed after its loop, an error nobody can catch)."""
    opened: list[T] = []

    async def kept() -> T:
        opened.append(await opening)
        return opened[0]

    try:
        return await within(seconds, kept())
    except BaseException:
        for thing in opened:
            with contextlib.suppress(Exception):  # the error being raised is the one to say
                close(thing)
        raise


async def _cut_off(seconds: float | None, awaitable: Awaitable[T], recancel: float | None) -> T:
    """Python 3.10's :func:`within` and :func:`within_or_recancel`, as 3.11's behave: the awaited
    call, cancelled at the deadline (and again ``recancel`` later if it goes on), ends
    in place; a result it returned all the same is the result, a cancellation is
    :class:`TimeoutError` (the builtin one, as on 3.11). Cancelled itself, it returns
    only once the call has ended too."""
    future = asyncio.ensure_future(awaitable)
    try:
        done, _ = await asyncio.wait({future}, timeout=seconds)
    except asyncio.CancelledError:
        await _cancelled_and_ended(future, recancel)
        raise
    if not done and await _cancelled_and_ended(future, recancel):
        raise asyncio.CancelledError
    if future.cancelled():
        raise TimeoutError
    try:
        return future.result()
    except asyncio.TimeoutError as exc:  # a driver's own deadline: the one kind of timeout
        raise TimeoutError(*exc.args) from exc


async def _cancelled_and_ended(future: asyncio.Future[Any], recancel: float | None) -> bool:
    """Cancel ``future`` and wait until it has ended, its clean-up done (on 3.11 the call
    runs in the caller's task, so the caller goes on only after it: a connection it was
    using is not closed under a read still registered on its socket). It is cancelled
    again ``recancel`` seconds later if it goes on, and whenever the caller is
    cancelled meanwhile; True if the caller was."""
    caller_cancelled = False
    future.cancel()
    while not future.done():
        try:
            done, _ = await asyncio.wait({future}, timeout=recancel)
        except asyncio.CancelledError:
            caller_cancelled = True
            future.cancel()
            continue
        if not done:
            future.cancel()
            recancel = None  # once more, as 3.11's within_or_recancel does
    if not future.cancelled():
        future.exception()  # read: an error it ended with is the caller's to raise or drop
    return caller_cancelled


if sys.version_info >= (3, 11):

    async def within_or_recancel(seconds: float, awaitable: Awaitable[T]) -> T:
        """:func:`within`, cut off in place, and cancelled once more if its clean-up
        from the first cancellation goes on past :data:`RECANCEL_AFTER`: a driver may
        take its time over a cancellation (psycopg asks the server to cancel the query
        and waits up to 10 s for a hung one) and gives up on a second."""
        task = asyncio.current_task()
        assert task is not None, "awaited in a task"
        already = task.cancelling()
        loop = asyncio.get_running_loop()
        ours = 0

        def cancel_again() -> None:
            # again every RECANCEL_AFTER till the call ends: a loop stalled past the
            # deadline runs this in the deadline's own turn, where the two cancellations
            # are one (psycopg then took its whole 10 s clean-up)
            nonlocal ours, handle
            ours += 1
            task.cancel()
            handle = loop.call_later(RECANCEL_AFTER, cancel_again)

        handle = loop.call_later(seconds + RECANCEL_AFTER, cancel_again)
        try:
            async with asyncio.timeout(seconds):
                result = await awaitable
        except asyncio.CancelledError:
            if ours and _uncancel(task, ours) <= already:  # all ours: the time is up
                raise TimeoutError from None
            raise
        finally:
            handle.cancel()
        if ours:  # our later cancellations, which the awaited call swallowed as well
            _uncancel(task, ours)
        _raise_swallowed(already)
        return result

    def _uncancel(task: asyncio.Task[Any], times: int) -> int:
        """``task.uncancel()`` ``times`` times; the cancellations left."""
        left = task.cancelling()
        for _ in range(times):
            left = task.uncancel()
        return left

else:  # pragma: no cover - Python 3.10

    async def within_or_recancel(seconds: float, awaitable: Awaitable[T]) -> T:
        return await _cut_off(seconds, awaitable, recancel=RECANCEL_AFTER)


# The name before the field's word (fencelock.aio is public): kept.
insisting = within_or_recancel


async def stop(task: asyncio.Future[Any] | None) -> None:
    """Cancel ``task`` and wait until it has ended, cancelling again while it goes on;
    an exception it ended with other than its cancellation is raised here."""
    if task is None:
        return
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=RECANCEL_AFTER)
    with contextlib.suppress(asyncio.CancelledError):
        await task


def read_when_done(task: F) -> F:
    """``task``, awaited through :func:`asyncio.shield` by whoever needs its result: its
    error is read when it ends, so one that every waiter gave up on is not logged as
    never retrieved (each waiter still raises it)."""
    task.add_done_callback(_read_outcome)
    return task


def _read_outcome(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()
