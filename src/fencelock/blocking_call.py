"""A blocking call: an asyncio-native backend's request waited for on the driver's own
results, on the thread that runs the blocking client's call.

The blocking client runs asyncio-native backends on a shared loop
(:mod:`~fencelock.backends.shared_loop`) that the calling thread runs. Where the driver
can wait without the loop (kazoo's results, a socket the caller reads itself), each
answer's crossing into the loop costs more than the request: a wake-up of the loop's
selector, a callback, a future, a task step. So a blocking call runs as a task marked
*stepped* (:func:`stepped`), and a driver's leaf that sees :func:`active` waits for its
result right there, the loop held still meanwhile (it is this thread's, and nobody else
runs it). Tasks that the call starts are not stepped: they run on the loop. One
algorithm, in sync and async; public asyncio only, on every Python version.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextvars import ContextVar
from typing import Any, TypeVar

from fencelock import clock
from fencelock.errors import BackendUnavailable

T = TypeVar("T")

# The task a blocking call runs as (:func:`stepped`); tasks it starts inherit the
# variable, and are told apart by being other tasks.
_STEPPED: ContextVar[Stepped | None] = ContextVar("fencelock_stepped", default=None)


class Stepped:
    """One stepped call: the task it runs as; or, while ``off``, none: its thread drives
    it with no loop running (:func:`onto_the_loop` moves it onto one)."""

    __slots__ = ("off", "task")

    def __init__(self, task: asyncio.Task[Any] | None, off: bool = False) -> None:
        self.task, self.off = task, off

    def moved_onto(self, task: asyncio.Task[Any] | None) -> None:
        """The call goes on as ``task`` (None: it ended off the loop; a task it made
        meanwhile, run later, is not the stepped call)."""
        self.task, self.off = task, False


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


async def within(
    seconds: float | None,
    awaitable: Awaitable[T],
    bounded: Callable[[float | None, Awaitable[T]], Awaitable[T]],
) -> T:
    """:func:`fencelock.aio.within` for stepped code: ``bounded(seconds, awaitable)``
    (the plain deadline), with the request inside told to wait no later than ``seconds``
    from now (:class:`TimeoutError` if that cut it off, as the plain deadline says)."""
    if seconds is None:
        return await awaitable
    await onto_the_loop()
    own = clock.now() + seconds
    outer = _CALL_ENDS.get()
    token = _CALL_ENDS.set(own if outer is None else min(own, outer))
    try:
        return await bounded(seconds, awaitable)
    except CallEnded as exc:
        if outer is None or own < outer:
            raise TimeoutError(str(exc)) from exc
        raise
    finally:
        _CALL_ENDS.reset(token)


async def stepped(coro: Awaitable[T]) -> T:
    """``coro``, run as this task's stepped call (run it as a task of its own)."""
    _STEPPED.set(Stepped(asyncio.current_task()))
    return await coro


def off_the_loop() -> Stepped:
    """Mark the context as a stepped call its thread drives off the loop (call it in
    the context the call runs in); the mark, to name the task it moves onto."""
    call = Stepped(None, off=True)
    _STEPPED.set(call)
    return call


def active() -> bool:
    """Whether the code running now is a stepped call: a request may wait for its answer
    here, the loop held still."""
    call = _STEPPED.get()
    if call is None:
        return False
    if call.off:
        return True  # driven off the loop by its thread
    if call.task is None:
        return False
    try:
        return call.task is asyncio.current_task()
    except RuntimeError:  # no loop runs here
        return False


def is_off_the_loop() -> bool:
    """Whether the code running now is a stepped call driven off the loop."""
    call = _STEPPED.get()
    return call is not None and call.off


async def onto_the_loop() -> None:
    """Before what needs a running loop (a connection, a timer): a stepped call driven
    off the loop suspends once, and its thread moves it onto the loop."""
    if is_off_the_loop():
        await asyncio.sleep(0)


async def running_loop() -> asyncio.AbstractEventLoop:
    """The running loop, once a stepped call driven off the loop moved onto it."""
    await onto_the_loop()
    return asyncio.get_running_loop()


async def reading_here(
    coro: Coroutine[Any, Any, T],
    reader: asyncio.StreamReader,
    transport: asyncio.BaseTransport,
    timeout: float,
    what: str,
) -> T:
    """``coro``, which writes a request to ``transport`` and reads its reply from
    ``reader``, stepped: whatever it waits for, this reads from the transport's socket
    here and hands to ``reader`` (the loop is held still meanwhile), and steps it on.
    It waits ``timeout`` at most, or until the call's end (:class:`CallEnded`, naming
    ``what``); a Ctrl-C waits for the reply in flight (a request's outcome is then
    known). What the socket cannot give it (TLS records, which the transport decrypts;
    a request not wholly sent; anything else awaited) it waits for on the loop, within
    what is left of ``timeout`` (:class:`TimeoutError`)."""
    limit, cut = wait_limit(timeout)
    ends = clock.now() + (timeout if limit is None else limit)
    silent = _Silence(CallEnded if cut else TimeoutError, what, limit)
    fd = _plain_socket(transport)
    poll = select.poll()
    if fd is not None:
        poll.register(fd, select.POLLIN)
    interrupted: BaseException | None = None
    try:
        while True:
            finished, waiting = _send(coro)
            if finished:
                if interrupted is not None:
                    raise interrupted
                return waiting  # type: ignore[no-any-return]
            if waiting is None:  # a bare yield: one turn of the loop
                await asyncio.sleep(0)
                continue
            if fd is not None and not _write_buffer(transport):
                interrupted = _feed(reader, poll, fd, ends, silent) or interrupted
                if waiting.done():
                    continue
            # Not the reader's data (or not readable here): on the loop, in what is left.
            await onto_the_loop()
            done, _ = await asyncio.wait({waiting}, timeout=max(ends - clock.now(), 0.0))
            if not done:
                raise TimeoutError(f"{what} did not answer within {timeout:.3g}s")
    except BaseException:
        coro.close()
        raise


def _send(coro: Coroutine[Any, Any, Any]) -> tuple[bool, Any]:
    """One step of ``coro``: ``(True, its value)`` or ``(False, what it suspended on)``."""
    try:
        return False, coro.send(None)
    except StopIteration as done:
        return True, done.value


class _Silence:
    """The error for a request that got no answer, made only if it is raised."""

    __slots__ = ("kind", "limit", "what")

    def __init__(self, kind: type[Exception], what: str, limit: float | None) -> None:
        self.kind, self.what, self.limit = kind, what, limit

    def error(self) -> Exception:
        return self.kind(f"{self.what} did not answer within {self.limit:.3g}s")


def _feed(
    reader: asyncio.StreamReader, poll: select.poll, fd: int, ends: float, silent: _Silence
) -> BaseException | None:
    """:func:`_fed`, raising ``silent``'s error if nothing came by ``ends``; a Ctrl-C
    meanwhile is returned, to be raised once the reply in flight is read."""
    try:
        if not _fed(reader, poll, fd, ends):
            raise silent.error()
    except KeyboardInterrupt as exc:
        return exc
    return None


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
