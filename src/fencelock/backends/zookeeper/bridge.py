"""kazoo's threads meet the event loop here, and kazoo's errors become fencelock's.

kazoo runs a connection thread and a callback thread per client; its ``*_async``
calls return a result that calls back on the latter, and its watches fire there too.
Through :class:`LoopHandler` both are called on the connection thread instead, as each
message is read, so fencelock hears a watch's event before any answer the server sent
after it (what the ZooKeeper handoff relies on: an at-least mark's creation is heard
before the deletion that comes in the same transaction, or before a read's answer that
shows it). :func:`outcome` carries a result onto the caller's loop (no thread per call,
none per lock), and :func:`on_loop` does the same for watches and session-state
callbacks.

kazoo reads a server's answer to its handshake for as long as the session timeout
(30 s for the default TTL), and its ``stop()`` waits for that read: through the
handler (kazoo's interface for one), :class:`LoopHandler` bounds a connection's
opening by the URL's connect timeout and can cut the connections it made, and
:class:`QuietOnClose` keeps kazoo's lines about a session its client is closing
out of the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
from collections.abc import Callable
from typing import Any

from kazoo import exceptions as kz
from kazoo.handlers.threading import AsyncResult, KazooTimeoutError, SequentialThreadingHandler
from kazoo.protocol.states import Callback

from fencelock import blocking_call
from fencelock.aio import TIMEOUTS, within
from fencelock.errors import BackendUnavailable, ConfigError, FencelockError

_log = logging.getLogger("fencelock.zookeeper")

# What the recipe acts on itself: answers about nodes, not failures.
ANSWERS = (kz.NoNodeError, kz.NodeExistsError, kz.BadVersionError, kz.NotEmptyError)


class SessionLost(FencelockError):
    """The ZooKeeper session ended: every ephemeral node it held is gone."""


class _DirectResult(AsyncResult):  # type: ignore[misc]
    """kazoo's result of a request, calling back where it is set (kazoo's connection
    thread) rather than queued for its callback thread. fencelock's callbacks only hand
    the result to an event loop, so nothing blocks there, and every request saves a
    thread switch (kazoo's own blocking calls wait on the result the same direct way)."""

    def _do_callbacks(self) -> None:
        for callback in self._callbacks:
            callback(self)


class LoopHandler(SequentialThreadingHandler):  # type: ignore[misc]
    """kazoo's threading handler, with results and watches that call back directly (in
    the order the server sent them), a TCP connect bounded by ``connect_timeout``, and
    :meth:`cut` for the connections it made."""

    def __init__(self, connect_timeout: float) -> None:
        super().__init__()
        self._connect_timeout = connect_timeout
        self._guard = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._cut = False

    def async_result(self) -> AsyncResult:
        return _DirectResult(self)

    def dispatch_callback(self, callback: Callback) -> None:
        """A watch's callback, called where kazoo read its event (the connection thread),
        not queued behind other callbacks: an answer read after the event cannot reach
        the loop first. fencelock's watch callbacks only set flags and wake a loop."""
        try:
            callback.func(*callback.args)
        except Exception:  # as kazoo's callback thread does: logged, the connection goes on
            _log.exception("a ZooKeeper watch's callback failed")

    def create_connection(self, *args: Any, **kwargs: Any) -> socket.socket:
        """kazoo's connection to one server, its TCP connect given the connect timeout
        at most (kazoo gives it the whole session timeout); refused once cut."""
        timeout = kwargs.get("timeout")
        kwargs["timeout"] = (
            self._connect_timeout if timeout is None else min(timeout, self._connect_timeout)
        )
        if self._cut:
            raise ConnectionAbortedError("the ZooKeeper client is closing")
        sock: socket.socket = super().create_connection(*args, **kwargs)
        with self._guard:
            self._sockets = [s for s in self._sockets if s.fileno() != -1]
            self._sockets.append(sock)
        if self._cut:  # cut while it connected: a read on it must end too
            _shut(sock)
        return sock

    def cut(self) -> None:
        """Shut down every connection made (a read waiting on one returns at once, as
        on a connection the server closed) and refuse new ones: kazoo's connection
        thread then sees its client stopped and ends."""
        with self._guard:
            self._cut = True
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            _shut(sock)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


class QuietOnClose(logging.LoggerAdapter):  # type: ignore[type-arg]
    """kazoo's logger for one client (its ``logger`` option): kazoo's own lines, until
    :meth:`quiet` — from then on they are about the session fencelock is closing (a
    connection it cut, a handshake it gave up on), not news."""

    def __init__(self) -> None:
        super().__init__(logging.getLogger("kazoo.client"), {})
        self._quiet = False

    def quiet(self) -> None:
        self._quiet = True

    def isEnabledFor(self, level: int) -> bool:
        return not self._quiet and self.logger.isEnabledFor(level)


def on_loop(loop: asyncio.AbstractEventLoop, call: Callable[..., object], *args: Any) -> None:
    """Run ``call(*args)`` on ``loop`` from one of kazoo's threads (dropped once the
    loop is closed: nobody is left to hear it)."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(call, *args)


async def outcome(result: Any, timeout: float, where: str) -> Any:
    """The value of a kazoo ``IAsyncResult`` on this loop; a fencelock error if the
    call failed or no answer came within ``timeout``. Stepped (the blocking client,
    :mod:`~fencelock.blocking_call`), it waits for the result right here."""
    if blocking_call.active():
        return _waited_for(result, timeout, where)
    loop = await blocking_call.running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def done(async_result: Any) -> None:  # on kazoo's callback thread
        try:
            on_loop(loop, settle, async_result.get_nowait(), None)
        except Exception as exc:  # the call's own failure, translated on the loop
            on_loop(loop, settle, None, exc)

    result.rawlink(done)
    try:
        return await within(timeout, future)
    except TIMEOUTS as exc:
        raise BackendUnavailable(f"ZooKeeper ({where}) did not answer within {timeout:g}s") from exc
    except ANSWERS:
        raise
    except kz.KazooException as exc:
        raise translated(exc, where) from exc


def _waited_for(result: Any, timeout: float, where: str) -> Any:
    """:func:`outcome`, waited for on this thread, by ``timeout`` or the blocking call's
    end (:func:`~fencelock.blocking_call.time_left`), whichever is first."""
    wait, cut = blocking_call.wait_limit(timeout)
    try:
        return result.get(timeout=wait)
    except KazooTimeoutError as exc:
        if result.ready():  # kazoo's own timeout (no server answered): its failure
            raise translated(exc, where) from exc
        ended = blocking_call.CallEnded if cut else BackendUnavailable
        raise ended(f"ZooKeeper ({where}) did not answer within {wait:.3g}s") from exc
    except ANSWERS:
        raise
    except kz.KazooException as exc:
        raise translated(exc, where) from exc


def translated(exc: BaseException, where: str) -> FencelockError:
    """The fencelock error for a kazoo failure, saying what to do about it."""
    if isinstance(exc, FencelockError):
        return exc
    if isinstance(exc, (kz.SessionExpiredError, kz.ConnectionClosedError)):
        return SessionLost(f"ZooKeeper session expired or closed ({where})")
    if isinstance(exc, kz.NoAuthError):
        return BackendUnavailable(
            f"ZooKeeper refused access ({where}): the node's ACL does not let these "
            "credentials in; give user:password in the URL"
        )
    if isinstance(exc, kz.AuthFailedError):
        return BackendUnavailable(f"ZooKeeper refused our credentials ({where})")
    if isinstance(exc, (kz.ConnectionLoss, kz.ConnectionDropped, kz.OperationTimeoutError)):
        return BackendUnavailable(f"ZooKeeper ({where}) connection lost: {exc!r}")
    if isinstance(exc, KazooTimeoutError):
        return BackendUnavailable(f"ZooKeeper at {where} unreachable: no server answered in time")
    if isinstance(exc, kz.ZookeeperStoppedError):
        return BackendUnavailable(f"ZooKeeper client for {where} is closed")
    if isinstance(exc, (kz.BadArgumentsError, kz.InvalidACLError)):
        return ConfigError(f"ZooKeeper ({where}) refused the request as malformed: {exc!r}")
    return BackendUnavailable(f"ZooKeeper ({where}): {type(exc).__name__} {exc}")
