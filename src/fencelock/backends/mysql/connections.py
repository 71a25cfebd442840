"""This client's connections to MySQL/MariaDB, and the errors they raise.

Every held lease has a connection of its own (a named lock belongs to the connection
that took it); a connection whose lease ended goes back to a short idle list, for the
next lease or statement. A connection that failed or was interrupted mid-statement is
closed, never reused: the server then lets go of any lock it held.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from typing import Any

import aiomysql
import pymysql
from pymysql.constants import CLIENT

from fencelock import blocking_call, forking
from fencelock.aio import TIMEOUTS, opened_within, within
from fencelock.backends.mysql.options import MySQLOptions
from fencelock.backends.mysql.statements import Statements
from fencelock.errors import BackendUnavailable, ConfigError, FencelockError

MAX_IDLE = 8
DEFAULT_IDLE = 28800  # the server's wait_timeout, unless a lease set another
IDLE_MARGIN = 0.5  # an idle connection this close to its server's limit is not reused
# MySQL error codes fencelock names
ACCESS_DENIED = 1045
UNKNOWN_DATABASE = 1049
TABLE_ACCESS_DENIED = {1142, 1044}  # command denied on table / access denied to database
LOST = {2006, 2013, 2055}  # server gone, lost connection
CANNOT_CONNECT = {2003, 2005}  # nothing listens there, unknown host


class Connections:
    def __init__(self, options: MySQLOptions, url: str) -> None:
        self.options, self.url = options, url
        self.statements = Statements(options.database)
        self._idle: list[aiomysql.Connection] = []
        self._table_ready = False

    async def checkout(self) -> aiomysql.Connection:
        """An idle connection the server has not timed out yet, or a new one."""
        await self.ensure_table()
        while self._idle:
            conn = self._idle.pop()
            if time.monotonic() < conn.fencelock_fresh_until:
                return conn
            await discard(conn)  # a lease's short wait_timeout may have ended it
        return await self.connect()

    async def checkin(self, conn: aiomysql.Connection, idle_limit: int | None = None) -> None:
        """Back to the idle list; ``idle_limit``: the wait_timeout last set on it."""
        if len(self._idle) < MAX_IDLE and not conn.closed:
            limit: int = DEFAULT_IDLE
            if idle_limit is not None:
                limit = idle_limit
            elif hasattr(conn, "fencelock_idle_limit"):
                limit = conn.fencelock_idle_limit
            conn.fencelock_idle_limit = limit
            conn.fencelock_fresh_until = time.monotonic() + limit - IDLE_MARGIN
            self._idle.append(conn)
        else:
            await discard(conn)

    async def connect(self) -> aiomysql.Connection:
        options = self.options
        context = None
        if options.ssl_ca is not None:
            try:
                context = ssl.create_default_context(cafile=options.ssl_ca)
            except OSError as exc:
                raise ConfigError(
                    f"option ssl_ca={options.ssl_ca!r} in {self.url!r}: cannot read the CA "
                    f"file ({exc.strerror or exc})"
                ) from exc
        try:
            return await opened_within(
                options.connect_timeout + 1,
                aiomysql.connect(
                    host=options.host,
                    port=options.port,
                    user=options.user,
                    password=options.password or "",
                    db=options.database,
                    autocommit=True,
                    connect_timeout=options.connect_timeout,
                    client_flag=CLIENT.MULTI_STATEMENTS | CLIENT.FOUND_ROWS,
                    ssl=context,
                    charset="utf8mb4",
                ),
                close=aiomysql.Connection.close,
            )
        except TIMEOUTS as exc:
            raise BackendUnavailable(
                f"MySQL ({self.url}) did not answer within {options.connect_timeout:g} s"
            ) from exc
        except (pymysql.Error, OSError) as exc:
            raise self.translated(exc) from exc

    async def run(
        self,
        conn: aiomysql.Connection,
        query: str,
        params: dict[str, Any],
        timeout: float,
        *,
        waits: bool = False,
    ) -> list[list[tuple[Any, ...]]]:
        """Every result set of ``query`` on ``conn``; on failure ``conn`` is closed.
        Stepped (the blocking client), the reply is read on the calling thread, unless
        the statement ``waits`` (``GET_LOCK`` with a timeout): the loop runs meanwhile."""
        try:
            async with _turn(conn):  # one statement at a time (a renewal meets a release)
                results = _results(conn, query, params)
                streams = None if waits or not blocking_call.active() else aiomysql_streams(conn)
                if streams is None:
                    return await within(timeout, results)
                reader, transport = streams
                return await blocking_call.reading_here(
                    results, reader, transport, timeout, "MySQL"
                )
        except BaseException as exc:
            await discard(conn)
            if isinstance(exc, TIMEOUTS):
                raise BackendUnavailable(
                    f"MySQL ({self.url}) did not answer within {timeout:g} s"
                ) from exc
            if isinstance(exc, (pymysql.Error, OSError)):
                raise self.translated(exc) from exc
            raise

    async def fetch(self, query: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """One statement on a pooled connection; its rows."""
        conn = await self.checkout()
        sets = await self.run(conn, query, params, self.options.timeout)
        await self.checkin(conn)
        return sets[-1] if sets else []

    async def ensure_table(self) -> None:
        if self._table_ready:
            return
        conn = self._idle.pop() if self._idle else await self.connect()
        present = {"database": self.options.database}
        sets = await self.run(conn, self.statements.present, present, self.options.timeout)
        if sets[0][0][0] < 3:  # a table or a column is missing (an older fencelock's)
            await self.run(conn, self.statements.create, {}, self.options.timeout)
        await self.checkin(conn)
        self._table_ready = True

    def translated(self, exc: BaseException) -> FencelockError:
        code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
        text = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
        if code == ACCESS_DENIED:
            return BackendUnavailable(f"MySQL refused our credentials ({self.url}): {text}")
        if code == UNKNOWN_DATABASE:
            return ConfigError(f"{self.url}: {text}")
        if code in TABLE_ACCESS_DENIED:
            return ConfigError(
                f"MySQL user {self.options.user or '(default)'} may not use fencelock's table "
                f"({self.url}): {text}. Grant it CREATE, SELECT, INSERT, UPDATE on "
                f"{self.statements.table}, or let an owner run `fencelock init --url ...` "
                "and grant SELECT, INSERT, UPDATE"
            )
        if code in LOST or code in CANNOT_CONNECT or isinstance(exc, OSError):
            return BackendUnavailable(f"MySQL at {self.url} unreachable: {text}")
        return BackendUnavailable(f"MySQL ({self.url}): {text}")

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            await discard(conn)

    def forget(self) -> None:
        """In a forked child: the parent's connections stay the parent's."""
        forking.abandon(list(self._idle))
        self._idle = []


def lost(exc: BaseException) -> bool:
    """Whether ``exc`` says the connection is gone (and with it any lock it held)."""
    cause = exc.__cause__ if isinstance(exc, FencelockError) else exc
    if isinstance(cause, OSError | asyncio.IncompleteReadError | ConnectionError):
        return True
    return isinstance(cause, pymysql.Error) and bool(cause.args) and cause.args[0] in LOST


def _turn(conn: aiomysql.Connection) -> asyncio.Lock:
    turn: asyncio.Lock | None = getattr(conn, "fencelock_turn", None)
    if turn is None:
        turn = conn.fencelock_turn = asyncio.Lock()
    return turn


def aiomysql_streams(
    conn: aiomysql.Connection,
) -> tuple[asyncio.StreamReader, asyncio.Transport] | None:
    """The connection's reader and transport (aiomysql keeps them as ``_reader`` and
    ``_writer``, its one inside fencelock reads: tests/unit/test_public_apis_only.py
    pins it), for a stepped read and a watched hang-up; None if this aiomysql keeps
    them otherwise."""
    reader, writer = getattr(conn, "_reader", None), getattr(conn, "_writer", None)
    if not isinstance(reader, asyncio.StreamReader) or writer is None:
        return None
    return reader, writer.transport


async def _results(
    conn: aiomysql.Connection, query: str, params: dict[str, Any]
) -> list[list[tuple[Any, ...]]]:
    async with conn.cursor() as cursor:
        await cursor.execute(query, params)
        sets = [list(await cursor.fetchall())]
        while await cursor.nextset():
            sets.append(list(await cursor.fetchall()))
        return sets


async def discard(conn: aiomysql.Connection) -> None:
    with contextlib.suppress(Exception):
        conn.close()
