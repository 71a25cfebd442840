"""A held lease's connection, watched: its end is the lease's end, heard at once.

A named lock ends with the connection that took it, and the server gives it to a
waiter in the same instant (``KILL``, a crash, ``wait_timeout``). The connection's
transport already reads the socket whenever the loop runs; a thin protocol in front of
aiomysql's own tells the lease's :class:`~fencelock.engine.session.SharedSession` when the
server hangs up, and :mod:`~fencelock.backends.idle_watch` makes the blocking client's
loop run when that happens between calls.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiomysql

from fencelock.backends import idle_watch
from fencelock.backends.mysql.connections import aiomysql_streams
from fencelock.engine.session import SharedSession


class WatchedConnection:
    """``conn`` holding one named lock; ``news`` ends when the connection does."""

    def __init__(self, conn: aiomysql.Connection, where: str) -> None:
        self.conn = conn
        self.news = SharedSession(f"MySQL connection {conn.thread_id()} ({where})")
        streams = aiomysql_streams(conn)
        self._transport: Any = None if streams is None else streams[1]
        self._loop = asyncio.get_running_loop()
        self._fd: int | None = None
        if self._transport is None or self._transport.is_closing():
            self._ended("its connection was already closed")
            return
        self._protocol = _Hangup(self._transport.get_protocol(), self._ended)
        self._transport.set_protocol(self._protocol)
        sock = self._transport.get_extra_info("socket")
        if sock is not None:
            self._fd = sock.fileno()
            idle_watch.watch(self._loop, self._fd)

    def _ended(self, how: str) -> None:
        self.news.end(
            f"MySQL ended connection {self.conn.thread_id()} ({how}) and its named lock "
            "with it: another owner may hold it now"
        )

    def done(self) -> None:
        """The lease is over (released, kept, found lost): stop watching, tell nobody."""
        self.news.close("the lease ended first")
        fd, self._fd = self._fd, None
        if fd is not None:
            idle_watch.unwatch(self._loop, fd)
        if self._transport is not None and self._transport.get_protocol() is self._protocol:
            self._transport.set_protocol(self._protocol.inner)


class _Hangup(asyncio.Protocol):
    """aiomysql's protocol, with a word to ``on_end`` when the server hangs up."""

    def __init__(self, inner: Any, on_end: Any) -> None:
        self.inner, self._on_end = inner, on_end

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        self._on_end("closed by the server")
        return self.inner.eof_received()  # type: ignore[no-any-return]

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_end(f"connection lost: {exc}" if exc else "connection closed")
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def __getattr__(self, name: str) -> Any:  # the stream's helpers (_drain_helper, ...)
        return getattr(self.inner, name)
