"""One PostgreSQL session that holds advisory locks: a connection of its own, watched.

Session advisory locks belong to the server process of one connection: they end
when it ends, so the connection *is* the lease's session. Statements on it run one at
a time; between them the client watches its socket (the blocking client too, through
:mod:`~fencelock.backends.idle_watch`), so a connection the server
closed (``pg_terminate_backend``, a restart, ``idle_session_timeout``) ends the
session at once and every lease held in it is lost, not discovered at the next
renewal. ``idle_session_timeout`` is the TTL: a client that goes silent (paused,
partitioned) for that long has its session, and its locks, ended by the server.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import psycopg
from psycopg import pq

from fencelock import forking
from fencelock.backends import idle_watch
from fencelock.backends.postgresql.connections import Connections
from fencelock.engine.session import SharedSession
from fencelock.errors import BackendUnavailable


class LockSession:
    """A connection holding advisory locks; ``news`` tells its leases when it ends."""

    def __init__(self, conn: psycopg.AsyncConnection[Any], ttl: float, where: str) -> None:
        self.conn, self.ttl, self.where = conn, ttl, where
        self.pid = conn.info.backend_pid
        self.news = SharedSession(f"PostgreSQL session {self.pid} (TTL {ttl:g}s)")
        self.held: dict[int, str] = {}  # advisory key -> owner, as this client took them
        self._turn = asyncio.Lock()
        self._loop = asyncio.get_running_loop()
        # the socket's number, kept: once the connection is lost libpq no longer tells it,
        # and a reader left on it would meet the next connection given the same number
        self._fd: int | None = None
        self._watch()

    @classmethod
    async def open(cls, connections: Connections, ttl: float) -> LockSession:
        ttl_ms = str(max(1, round(ttl * 1000)))
        conn = await connections.connect(idle_session_timeout=ttl_ms)
        return cls(conn, ttl, connections.url)

    @property
    def ended(self) -> bool:
        return self.news.ended_because is not None

    async def run(self, query: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """One statement on the session; a failure that ends the connection ends it."""
        async with self._turn:
            if self.ended:
                raise BackendUnavailable(f"{self.news.label} ended: {self.news.ended_because}")
            self._unwatch()
            try:
                cursor = await self.conn.execute(query, params)
                return await cursor.fetchall() if cursor.description else []
            except psycopg.Error as exc:
                if (
                    self.conn.broken
                    or self.conn.closed
                    or isinstance(exc, psycopg.OperationalError)
                ):
                    self.end(f"its connection to {self.where} failed: {exc}")
                raise
            except BaseException:
                # Cancelled mid-statement. psycopg asks the server to cancel it and waits
                # it out: the session is intact if that wait ended (the caller gives
                # back what the statement may have taken), its state unknown if not.
                if not _idle(self.conn):
                    self.end("a statement on it was interrupted")
                raise
            finally:
                self._watch()

    def end(self, reason: str) -> None:
        """The server has let (or will let) go of every lock held in the session."""
        self._unwatch()
        self.news.end(reason)
        self.held.clear()
        self._loop.create_task(_close(self.conn))

    async def close(self) -> None:
        """Close the connection: the server releases whatever it still held."""
        self._unwatch()
        self.news.close("closed by the client")
        await _close(self.conn)

    def forget(self) -> None:
        """In a forked child: the parent's session stays the parent's."""
        self._fd = None  # the child's loop is a new one: no reader was added there
        forking.abandon(self.conn)
        self.news.close("left with the parent process at fork()")

    def _watch(self) -> None:
        if self._fd is not None or self.ended or self.conn.closed:
            return
        fd = self.conn.pgconn.socket
        self._loop.add_reader(fd, self._readable)
        idle_watch.watch(self._loop, fd)
        self._fd = fd

    def _unwatch(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            idle_watch.unwatch(self._loop, fd)
            self._loop.remove_reader(fd)

    def _readable(self) -> None:
        """Something arrived while no statement ran: a notice, or the end."""
        pgconn = self.conn.pgconn
        try:
            pgconn.consume_input()
            alive = pgconn.status == psycopg.pq.ConnStatus.OK
            reason = pgconn.get_error_message().strip()
        except Exception as exc:
            alive, reason = False, str(exc)
        if not alive:
            detail = (reason or "connection lost").splitlines()[0]
            self.end(
                f"PostgreSQL ended session {self.pid} ({detail}) and its advisory locks "
                "with it: another owner may hold them now"
            )


async def _close(conn: psycopg.AsyncConnection[Any]) -> None:
    with contextlib.suppress(Exception):
        await conn.close()


def _idle(conn: psycopg.AsyncConnection[Any]) -> bool:
    """Whether ``conn`` is open and between statements (ready for the next one)."""
    return not (conn.broken or conn.closed) and (
        conn.pgconn.transaction_status == pq.TransactionStatus.IDLE
    )
