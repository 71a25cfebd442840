"""Stepping: an asyncio-native backend's coroutine run as a plain call on the calling
thread, its requests waited for on the driver's own results.

The blocking client runs asyncio-native backends on a shared loop
(:mod:`~fencelock.backends.shared_loop`). Where the driver already waits on threads of
its own (kazoo's), each answer's crossing into the loop costs more than the request: a
wake-up of the loop's selector, a callback, a future, a task step. Stepped, the same
coroutine runs by ``coro.send(None)``: a driver's leaf that sees :func:`active` waits
on its result right there, so a coroutine that never suspends finishes without a turn
of the loop. One that does suspend (it opens a session) is handed to the loop where
it stopped and finishes there (:func:`resume`). One that waits for news a driver's
thread brings (a ZooKeeper watch) can :func:`block` instead: its thread waits, the
loop left to other threads' calls, and it is stepped on after. One algorithm, in
every case: nothing is written twice.

While stepping, the shared loop is this thread's running loop (the caller holds its
baton), so the coroutine may make tasks and futures on it; those run later, on the
loop, not stepped (:func:`active` is false inside a task).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import select
import threading
import types
from collections.abc import Awaitable, Coroutine, Generator, Iterator
from contextvars import ContextVar
from typing import Any, TypeVar

from fencelock import clock
from fencelock.errors import BackendUnavailable

T = TypeVar("T")

_STEPPING: ContextVar[bool] = ContextVar("fencelock_stepping", default=False)

# When the blocking call under way must end (a clock.now() time), for a driver whose
# own waits are its only bound (the blocking Redis client's sockets, a stepped
# request): per thread and task.
_CALL_ENDS: ContextVar[float | None] = ContextVar("fencelock_call_ends", default=None)


@contextlib.contextmanager
def call_ends_at(when: float | None) -> Iterator[None]:
    """Within: a blocking driver's request waits no later than ``when`` (None: as its
    own timeout says), read by :func:`time_left`."""
    token = _CALL_ENDS.set(when)
    try:
        yield
    finally:
        _CALL_ENDS.reset(token)


class CallEnded(BackendUnavailable):
    """A blocking driver's request cut off at the end :func:`call_ends_at` set."""


def time_left() -> float | None:
    """Seconds until the call under way must end (None: no end set; may be <= 0)."""
    when = _CALL_ENDS.get()
    return None if when is None else when - clock.now()


def wait_limit(timeout: float | None) -> tuple[float | None, bool]:
    """How long a stepped request may wait, given its own ``timeout`` (None: none), and
    whether the call's end (:func:`time_left`) is what limits it: then its driver
    raises :class:`CallEnded` when the wait runs out."""
    left = time_left()
    if left is None or (timeout is not None and timeout <= left):
        return timeout, False
    return max(left, 0.0), True


async def within(seconds: float | None, awaitable: Awaitable[T]) -> T:
    """:func:`fencelock.aio.within` for stepped code: the request inside waits no later
    than ``seconds`` from now (:class:`TimeoutError` if that cut it off). If it
    suspends, its rest runs as a task of its own, cut off at the same moment."""
    if seconds is None:
        return await awaitable
    own = clock.now() + seconds
    outer = _CALL_ENDS.get()
    _CALL_ENDS.set(own if outer is None else min(own, outer))
    try:
        if not asyncio.iscoroutine(awaitable):
            return await asyncio.wait_for(awaitable, max(own - clock.now(), 0.0))
        finished, outcome = _send(awaitable)
        while not finished and isinstance(outcome, Blocked):
            await _passed_up(outcome)  # the stepper waits, bounded by this call's end
            finished, outcome = _send(awaitable)
        if finished:
            return outcome  # type: ignore[no-any-return]
        rest = asyncio.get_running_loop().create_task(resume(awaitable, outcome))
        return await asyncio.wait_for(rest, max(own - clock.now(), 0.0))
    except CallEnded as exc:
        if outer is None or own < outer:
            raise TimeoutError from exc
        raise
    finally:
        _CALL_ENDS.set(outer)


class Blocked:
    """What a stepped coroutine yields (:func:`block`) to have its thread wait, off the
    loop, until ``event`` is set or ``timeout`` passes; then it is stepped on."""

    __slots__ = ("event", "timeout")

    def __init__(self, event: threading.Event, timeout: float | None) -> None:
        self.event, self.timeout = event, timeout

    def wait(self) -> None:
        """The wait, bounded by the call's end too (run in the stepped context)."""
        limit, _ = wait_limit(self.timeout)
        self.event.wait(limit)


@types.coroutine
def block(event: threading.Event, timeout: float | None) -> Generator[Blocked, None, None]:
    """Stepped only (:func:`active`): wait until ``event`` is set or ``timeout`` passes,
    on this thread, the loop left free for other threads' calls meanwhile (the
    stepper, :meth:`~fencelock.backends.shared_loop.SharedLoop.run_stepped`, does)."""
    yield Blocked(event, timeout)


@types.coroutine
def _passed_up(blocked: Blocked) -> Generator[Blocked, None, None]:
    yield blocked


async def reading_here(
    coro: Coroutine[Any, Any, T],
    reader: asyncio.StreamReader,
    transport: asyncio.BaseTransport,
    timeout: float,
    what: str,
) -> T:
    """``coro``, which writes a request to ``transport`` and reads its reply from
    ``reader``, stepped: the caller holds the loop, which is not running, so whatever
    ``reader`` waits for is read from the transport's socket here and handed to it,
    the driver's own parser stepped on. It waits ``timeout`` at most, or until the
    call's end (:class:`CallEnded`, naming ``what``); a Ctrl-C waits for the reply in
    flight (a request's outcome is then known, and what is sent next comes after it).
    Where only the loop can go on (TLS, which the transport decrypts; a request not
    wholly sent; anything else awaited), the rest runs as a task, within what is left
    of ``timeout`` (:class:`TimeoutError`)."""
    limit, cut = wait_limit(timeout)
    ends = clock.now() + (timeout if limit is None else limit)
    fd = _plain_socket(transport)
    poll = select.poll()
    if fd is not None:
        poll.register(fd, select.POLLIN)
    interrupted: BaseException | None = None
    while True:
        finished, outcome = _send(coro)  # what it raises, it raised as it ended
        if finished:
            if interrupted is not None:
                raise interrupted
            return outcome  # type: ignore[no-any-return]
        waiting = getattr(reader, "_waiter", None)
        if fd is None or outcome is not waiting or _write_buffer(transport):
            rest = asyncio.get_running_loop().create_task(resume(coro, outcome))
            return await asyncio.wait_for(rest, max(ends - clock.now(), 0.0))
        try:
            if _fed(reader, poll, fd, ends):
                continue
        except KeyboardInterrupt as exc:
            interrupted = exc
            continue
        except BaseException:
            coro.close()
            raise
        coro.close()
        ended = CallEnded if cut else TimeoutError
        raise ended(f"{what} did not answer within {limit:.3g}s") from interrupted


def _plain_socket(transport: asyncio.BaseTransport) -> int | None:
    """The file descriptor of ``transport``'s socket, if bytes read from it are the
    stream's own (not TLS records); else None."""
    if transport.get_extra_info("sslcontext") is not None:
        return None
    sock = transport.get_extra_info("socket")
    return None if sock is None else int(sock.fileno())


def _write_buffer(transport: asyncio.BaseTransport) -> int:
    size = getattr(transport, "get_write_buffer_size", None)
    return 0 if size is None else int(size())


def _fed(reader: asyncio.StreamReader, poll: select.poll, fd: int, ends: float) -> bool:
    """Hand ``reader`` what arrives on ``fd`` by ``ends`` (its end, if it closed);
    False if nothing did."""
    while (left := ends - clock.now()) > 0 and poll.poll(left * 1000):
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            continue
        if data:
            reader.feed_data(data)
        else:
            reader.feed_eof()
        return True
    return False


def _send(coro: Coroutine[Any, Any, Any]) -> tuple[bool, Any]:
    """One step of ``coro``: ``(True, its value)`` or ``(False, what it suspended on)``."""
    try:
        return False, coro.send(None)
    except StopIteration as done:
        return True, done.value


def active() -> bool:
    """Whether the code running now is stepped: a request may wait for its answer here."""
    return _STEPPING.get() and asyncio.current_task() is None


def step(
    coro: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop
) -> tuple[bool, Any, contextvars.Context]:
    """Run ``coro`` until it finishes or suspends: ``(True, its value, _)``, or ``(False,
    what it suspended on, the context it ran in)``, for a task that runs
    :func:`resume` in that same context (what it set before suspending, it reads
    after). Its exception propagates. It runs in a copy of this thread's context: what
    it sets stays out of the caller's."""
    context = contextvars.copy_context()
    finished, outcome = context.run(_first_step, coro, loop)
    return finished, outcome, context


def step_on(
    coro: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop, context: contextvars.Context
) -> tuple[bool, Any]:
    """:func:`step` again, in ``context`` (the first step's), after a :class:`Blocked`."""
    return context.run(_next_step, coro, loop)


def _first_step(
    coro: Coroutine[Any, Any, Any], loop: asyncio.AbstractEventLoop
) -> tuple[bool, Any]:
    _STEPPING.set(True)
    return _next_step(coro, loop)


def _next_step(coro: Coroutine[Any, Any, Any], loop: asyncio.AbstractEventLoop) -> tuple[bool, Any]:
    asyncio._set_running_loop(loop)
    try:
        return _send(coro)
    finally:
        asyncio._set_running_loop(None)


async def resume(coro: Coroutine[Any, Any, T], suspended_on: Any) -> T:
    """Finish ``coro``, suspended on ``suspended_on`` (a future, or None for a bare
    yield), as the task running it would have: wake it when that is done, and pass a
    cancellation of this task on to it."""
    while True:
        thrown: BaseException | None = None
        try:
            if suspended_on is None:
                await asyncio.sleep(0)
            else:
                # Taken over, as a task takes a future its coroutine yields (else the
                # future refuses a second await).
                suspended_on._asyncio_future_blocking = False
                await suspended_on
        except asyncio.CancelledError as exc:
            # The future itself was cancelled: the coroutine reads that from it. Else
            # this task was: tell the coroutine, as its own task would have.
            if suspended_on is None or not suspended_on.cancelled():
                thrown = exc
        except BaseException:
            pass  # the future's own failure: the coroutine reads it from the future
        try:
            suspended_on = coro.send(None) if thrown is None else coro.throw(thrown)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
