"""The lock scripts' hot path: pre-packed EVALSHA on connections of fencelock's own.

redis-py's client spends about as long on each command as the loopback round trip
itself: a pool checkout with a readiness poll, the retry wrapper, event dispatch and
observability hooks, then packing the command. Acquire, release and renew instead
send a command packed here on a connection that only this module uses, and read
the reply with the connection's own parser; everything else (pub/sub, inspection,
``WAIT``) still goes through the client. Connections, authentication and TLS are
still redis-py's: the wire takes them from the client's pool.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from fencelock.backends.redis.resp import Script

T = TypeVar("T")

if sys.version_info >= (3, 11):

    async def within(seconds: float | None, awaitable: Awaitable[T]) -> T:
        """Await with a deadline, without the task ``wait_for`` costs before 3.12."""
        async with asyncio.timeout(seconds):
            return await awaitable

else:  # pragma: no cover - Python 3.10

    async def within(seconds: float | None, awaitable: Awaitable[T]) -> T:
        return await asyncio.wait_for(awaitable, seconds)


# An idle connection older than this is polled before use: a server or proxy that
# closed it meanwhile is noticed before a command is sent, not after.
STALE_AFTER = 5.0


FollowUp = Callable[[Any], "bytes | None"]


class Wire:
    """Run scripts on dedicated connections made by a ``redis.Redis`` client's pool.

    Each call checks a connection out (a list pop: threads never share one) and
    back in. A connection that failed in any way but an error reply is closed.
    """

    def __init__(self, client: Any) -> None:
        self._make = client.connection_pool.make_connection
        self._idle: list[tuple[Any, float]] = []

    def run(self, script: Script, command: bytes) -> Any:
        return self.run_then(script, command, _nothing)[0]

    def run_then(self, script: Script, command: bytes, follow_up: FollowUp) -> tuple[Any, Any]:
        """Run the script, then ``follow_up(reply)`` (if not None) on the same connection.

        ``WAIT`` counts the replicas that have this connection's writes, so it
        must follow the script on its connection.
        """
        conn = self._checkout()
        try:
            reply = _call_script(conn, script, command)
            then = follow_up(reply)
            followed = None if then is None else _call(conn, then)
        except ResponseError:
            self._checkin(conn)
            raise
        except BaseException:
            conn.disconnect()
            raise
        self._checkin(conn)
        return reply, followed

    def _checkout(self) -> Any:
        try:
            conn, idle_since = self._idle.pop()
        except IndexError:
            return self._make()
        if time.monotonic() - idle_since > STALE_AFTER and _unusable(conn):
            conn.disconnect()
        return conn

    def _checkin(self, conn: Any) -> None:
        self._idle.append((conn, time.monotonic()))

    def close(self) -> None:
        while self._idle:
            conn, _since = self._idle.pop()
            conn.disconnect()


def _nothing(_reply: Any) -> None:
    return None


def _call_script(conn: Any, script: Script, command: bytes) -> Any:
    try:
        return _call(conn, command)
    except NoScriptError:
        _call(conn, script.load_command)
        return _call(conn, command)


def _call(conn: Any, command: bytes) -> Any:
    conn.send_packed_command((command,), check_health=False)
    return conn.read_response()


def _unusable(conn: Any) -> bool:
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

    def __init__(self, client: Any) -> None:
        pool = client.connection_pool
        self._make = pool.make_connection
        self._timeout: float | None = pool.connection_kwargs.get("socket_timeout")
        self._idle: list[tuple[Any, float]] = []

    async def run(self, script: Script, command: bytes) -> Any:
        return (await self.run_then(script, command, _nothing))[0]

    async def run_then(
        self, script: Script, command: bytes, follow_up: FollowUp
    ) -> tuple[Any, Any]:
        conn = await self._checkout()
        try:
            reply, followed = await within(
                self._timeout, _aexchange(conn, script, command, follow_up)
            )
        except ResponseError:
            self._checkin(conn)
            raise
        except asyncio.TimeoutError as exc:
            message = f"no answer within {self._timeout:g}s"
            if not conn.is_connected:  # in redis-py's words, as translate() reads them
                message = f"Timeout connecting to server (no connection within {self._timeout:g}s)"
            await conn.disconnect(nowait=True)
            raise RedisTimeoutError(message) from exc
        except BaseException:
            await conn.disconnect(nowait=True)
            raise
        self._checkin(conn)
        return reply, followed

    async def _checkout(self) -> Any:
        try:
            conn, idle_since = self._idle.pop()
        except IndexError:
            conn = self._make()
            conn.socket_timeout = None  # bounded per call, in run_then
            return conn
        if time.monotonic() - idle_since > STALE_AFTER and await _aunusable(conn):
            await conn.disconnect(nowait=True)
        return conn

    def _checkin(self, conn: Any) -> None:
        self._idle.append((conn, time.monotonic()))

    async def close(self) -> None:
        while self._idle:
            conn, _since = self._idle.pop()
            await conn.disconnect()


async def _aexchange(
    conn: Any, script: Script, command: bytes, follow_up: FollowUp
) -> tuple[Any, Any]:
    reply = await _acall_script(conn, script, command)
    then = follow_up(reply)
    return reply, None if then is None else await _acall(conn, then)


async def _acall_script(conn: Any, script: Script, command: bytes) -> Any:
    try:
        return await _acall(conn, command)
    except NoScriptError:
        await _acall(conn, script.load_command)
        return await _acall(conn, command)


async def _acall(conn: Any, command: bytes) -> Any:
    await conn.send_packed_command((command,), check_health=False)
    return await conn.read_response()


async def _aunusable(conn: Any) -> bool:
    if not conn.is_connected:
        return False
    try:
        return bool(await conn.can_read())
    except Exception:
        return True
