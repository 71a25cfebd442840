"""The lock scripts' hot path: pre-packed EVALSHA on connections of fencelock's own.

redis-py's client spends about as long on each command as the loopback round trip
itself: a pool checkout with a readiness poll, the retry wrapper, event dispatch and
observability hooks, then packing the command. Acquire, release and renew instead
send a command packed here on a connection that only this module uses, and read
the reply with the connection's own parser; everything else (pub/sub, inspection)
still goes through the client. Connections, authentication and TLS are still
redis-py's: the wire takes them from the client's pool.

What is said is decided by a conversation (:mod:`.conversations`, sans-I/O); the two wires
here only run it, blocking or with asyncio.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

import redis
import redis.asyncio
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from fencelock.aio import TIMEOUTS, within
from fencelock.backends.redis.conversations import Conversation, ConversationState
from fencelock.backends.redis.resp import RawReply
from fencelock.backends.redis.scripts import Command
from fencelock.blocking_call import time_left
from fencelock.errors import FencelockError

T = TypeVar("T")
A = TypeVar("A")

# An idle connection older than this is polled before use: a server or proxy that
# closed it meanwhile is noticed before a command is sent, not after.
STALE_AFTER = 5.0
# A call whose time is up still gets this long on the socket: its request is sent, and
# a server that answers at once is heard.
MIN_SOCKET_WAIT = 0.01


class Connection(Protocol):
    """What a wire uses of a redis-py connection (sync)."""

    def connect(self) -> None: ...

    def send_packed_command(self, command: Any, check_health: bool = True) -> None: ...

    def read_response(self) -> RawReply: ...

    def can_read(self, timeout: float = 0) -> bool: ...

    def disconnect(self) -> None: ...


class AsyncConnection(Protocol):
    """What a wire uses of a redis.asyncio connection."""

    is_connected: bool
    socket_timeout: float | None

    async def connect(self) -> None: ...

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None: ...

    async def read_response(self) -> RawReply: ...

    async def can_read(self) -> bool: ...

    async def disconnect(self, nowait: bool = False) -> None: ...


class Wire:
    """Run conversations on dedicated connections made by a ``redis.Redis`` client's pool.

    Each call checks a connection out (a list pop: threads never share one) and
    back in. A connection that failed in any way but an error reply is closed.
    """

    def __init__(self, client: redis.Redis) -> None:
        self._make: Callable[[], Connection] = client.connection_pool.make_connection
        self._idle: list[tuple[Connection, float]] = []

    def talk(self, talk: Conversation[T]) -> T:
        """Run ``talk`` on one connection; its result, or the error that ended it. An
        acquire with a timeout waits on the socket no longer than its call may last
        (:func:`fencelock.blocking_call.time_left`), if that is shorter."""
        talking = ConversationState(talk)
        self._on_a_connection(_talk_within_the_call, talking)
        return talking.result

    def pipeline(self, commands: Sequence[Command]) -> list[RawReply]:
        """Every command sent at once on one connection, then every reply read (an error
        reply as its ``ResponseError``, not raised); commands of a script the server does
        not know are sent once more after loading it."""
        return self._on_a_connection(_pipelined, commands)

    def _on_a_connection(self, exchange: Callable[[Connection, A], T], what: A) -> T:
        """``exchange(conn, what)`` on a connection checked out for it, and back in after,
        even after an error reply or a fencelock error; closed after any other failure (a
        reply may be left unread). ``what`` is passed, not closed over: the hot path."""
        conn = self._checkout()
        try:
            result = exchange(conn, what)
        except (ResponseError, FencelockError):
            self._checkin(conn)
            raise
        except BaseException:
            conn.disconnect()
            raise
        self._checkin(conn)
        return result

    def _checkout(self) -> Connection:
        try:
            conn, idle_since = self._idle.pop()
        except IndexError:
            return self._make()
        if time.monotonic() - idle_since > STALE_AFTER and _unusable(conn):
            conn.disconnect()
        return conn

    def _checkin(self, conn: Connection) -> None:
        self._idle.append((conn, time.monotonic()))

    def close(self) -> None:
        while self._idle:
            conn, _since = self._idle.pop()
            conn.disconnect()


def _talk_within_the_call(conn: Connection, talking: ConversationState[Any]) -> None:
    left = time_left()
    if left is None:  # the usual call: no context manager on the hot path
        _talk_on(conn, talking)
    else:
        with _no_later_than(conn, left):
            _talk_on(conn, talking)


def _talk_on(conn: Connection, talking: ConversationState[Any]) -> None:
    """``talking``'s commands and replies on ``conn`` (connected first if need be)."""
    # redis-py's connect() returns at once on a connected socket (a Sentinel's too, before
    # it asks for the master); its is_connected is new in redis-py 8.
    conn.connect()
    while talking.command is not None:
        conn.send_packed_command((talking.command,), check_health=False)
        talking.answer(_reply(conn))


@contextlib.contextmanager
def _no_later_than(conn: Connection, left: float) -> Iterator[None]:
    """The connection's timeouts (connecting, its handshake, each read) cut to ``left``,
    the time left of the call under way, and given back after."""
    own: float | None = getattr(conn, "socket_timeout", None)
    if own is not None and own <= left:
        yield
        return
    cut = max(left, MIN_SOCKET_WAIT)
    own_connect: float | None = getattr(conn, "socket_connect_timeout", None)
    _set_timeouts(conn, cut, cut if own_connect is None else min(own_connect, cut))
    try:
        yield
    finally:
        _set_timeouts(conn, own, own_connect)


def _set_timeouts(conn: Connection, timeout: float | None, connect: float | None) -> None:
    """redis-py reads these when it connects; a connected socket is told at once."""
    setattr(conn, "socket_timeout", timeout)  # noqa: B010 - not in the Connection protocol
    setattr(conn, "socket_connect_timeout", connect)  # noqa: B010
    sock: Any = getattr(conn, "_sock", None)  # redis-py's socket, once connected
    if sock is not None:
        sock.settimeout(timeout)


def _pipelined(conn: Connection, commands: Sequence[Command]) -> list[RawReply]:
    conn.connect()  # at once when connected (see _talk_on)
    replies = _all_at_once(conn, commands)
    unknown = [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
    if unknown:
        for script in {commands[i][0] for i in unknown}:
            if script is not None:
                loaded = _all_at_once(conn, [(None, script.load_command)])[0]
                if isinstance(loaded, ResponseError):
                    raise loaded
        again = _all_at_once(conn, [commands[i] for i in unknown])
        for i, reply in zip(unknown, again, strict=True):
            replies[i] = reply
    return replies


def _all_at_once(conn: Connection, commands: Sequence[Command]) -> list[RawReply]:
    conn.send_packed_command([packed for _, packed in commands], check_health=False)
    return [_reply(conn) for _ in commands]


def _reply(conn: Connection) -> RawReply:
    try:
        return conn.read_response()
    except ResponseError as exc:
        return exc


def _unusable(conn: Connection) -> bool:
    """True if an idle connection has something to read: the server closed it (EOF)."""
    try:
        return bool(conn.can_read(0))
    except Exception:
        return True


class AsyncWire:
    """:class:`Wire` for a ``redis.asyncio.Redis`` client (one event loop).

    The client's socket timeout bounds each whole call here, once, instead of each
    write and read: redis.asyncio bounds a write with ``wait_for``, a task per write
    before Python 3.12.
    """

    def __init__(self, client: redis.asyncio.Redis) -> None:
        pool = client.connection_pool
        self._make: Callable[[], AsyncConnection] = pool.make_connection
        self._timeout: float | None = pool.connection_kwargs.get("socket_timeout")
        self._idle: list[tuple[AsyncConnection, float]] = []

    async def talk(self, talk: Conversation[T]) -> T:
        """Run ``talk`` on one connection, within the client's socket timeout."""
        conn = await self._checkout()
        try:
            result = await within(self._timeout, _converse(conn, ConversationState(talk)))
        except (ResponseError, FencelockError):
            self._checkin(conn)
            raise
        except TIMEOUTS as exc:
            await conn.disconnect(nowait=True)
            raise self._timed_out(conn) from exc
        except BaseException:
            await conn.disconnect(nowait=True)
            raise
        self._checkin(conn)
        return result

    def _timed_out(self, conn: AsyncConnection) -> RedisTimeoutError:
        if conn.is_connected:
            return RedisTimeoutError(f"no answer within {self._timeout:g}s")
        # in redis-py's words, as errors.translate() reads them
        return RedisTimeoutError(
            f"Timeout connecting to server (no connection within {self._timeout:g}s)"
        )

    async def _checkout(self) -> AsyncConnection:
        try:
            conn, idle_since = self._idle.pop()
        except IndexError:
            conn = self._make()
            conn.socket_timeout = None  # bounded per call, in talk()
            return conn
        if time.monotonic() - idle_since > STALE_AFTER and await _aunusable(conn):
            await conn.disconnect(nowait=True)
        return conn

    def _checkin(self, conn: AsyncConnection) -> None:
        self._idle.append((conn, time.monotonic()))

    async def close(self) -> None:
        while self._idle:
            conn, _since = self._idle.pop()
            await conn.disconnect()


async def _converse(conn: AsyncConnection, talking: ConversationState[T]) -> T:
    if not conn.is_connected:  # connect() itself: a Sentinel's asks for the master
        await conn.connect()
    while talking.command is not None:
        await conn.send_packed_command((talking.command,), check_health=False)
        try:
            reply = await conn.read_response()
        except ResponseError as exc:
            reply = exc
        talking.answer(reply)
    return talking.result


async def _aunusable(conn: AsyncConnection) -> bool:
    if not conn.is_connected:
        return False
    try:
        return bool(await conn.can_read())
    except Exception:
        return True
