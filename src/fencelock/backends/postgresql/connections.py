"""This client's connections to PostgreSQL: a few for statements, and the errors they raise.

Statements run in autocommit on connections taken from a small idle list (made as
needed, at most :data:`MAX_CONNECTIONS` at once). A connection that failed or timed
out mid-statement is closed, never reused: its state is unknown. Every psycopg error
becomes a fencelock error here, naming what went wrong.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import psycopg
from psycopg import errors as pgerrors
from psycopg.conninfo import make_conninfo

from fencelock import forking
from fencelock.aio import within
from fencelock.backends.postgresql.options import PostgresOptions
from fencelock.backends.postgresql.sql import Statements
from fencelock.errors import BackendUnavailable, ConfigError, FencelockError

MAX_CONNECTIONS = 8


class Connections:
    """Connections for ``options``; ``url`` (redacted) goes into every error message."""

    def __init__(self, options: PostgresOptions, url: str) -> None:
        self.options, self.url = options, url
        self.statements = Statements(options.schema)
        self._idle: list[psycopg.AsyncConnection[Any]] = []
        self._slots = asyncio.Semaphore(MAX_CONNECTIONS)
        self._schema_ready = False

    async def connect(self) -> psycopg.AsyncConnection[Any]:
        """A new autocommit connection (the listener's, or one for statements)."""
        timeout_ms = round(self.options.timeout * 1000)
        try:
            return await within(
                self.options.connect_timeout + 1,
                psycopg.AsyncConnection.connect(
                    make_conninfo(
                        **self.options.connect_kwargs(),
                        options=f"-c statement_timeout={timeout_ms} -c lock_timeout={timeout_ms}",
                    ),
                    autocommit=True,
                ),
            )
        except TimeoutError as exc:
            raise BackendUnavailable(
                f"PostgreSQL ({self.url}) did not answer within {self.options.connect_timeout:g} s"
            ) from exc
        except psycopg.Error as exc:
            raise self.translated(exc) from exc

    async def fetchall(self, query: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """Run one statement; its rows."""
        await self.ensure_schema()
        return await self._run(query, params)

    async def _run(self, query: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """On a connection that died while idle (the server restarted, or an admin
        terminated it), the statement runs once more on a new one: every statement
        fencelock runs may run twice (:mod:`.sql`)."""
        try:
            return await self._once(query, params, reuse=True)
        except _Stale:
            return await self._once(query, params, reuse=False)

    async def _once(self, query: str, params: dict[str, Any], reuse: bool) -> list[tuple[Any, ...]]:
        async with self._connection(reuse) as conn:
            cursor = await within(self.options.timeout + 1, conn.execute(query, params))
            return await cursor.fetchall() if cursor.description else []

    async def ensure_schema(self) -> None:
        """Create the table and sequence once (``IF NOT EXISTS``: racing clients agree)."""
        if self._schema_ready:
            return
        if (await self._run(self.statements.present, {}))[0][0]:
            self._schema_ready = True
            return
        for statement in self.statements.create:
            for _ in range(3):  # two first users at once: one CREATE loses a catalog race
                try:
                    await self._run(statement, {})
                    break
                except ConfigError:
                    raise
                except FencelockError as exc:
                    if not isinstance(exc.__cause__, pgerrors.UniqueViolation):
                        raise
        self._schema_ready = True

    @contextlib.asynccontextmanager
    async def _connection(self, reuse: bool) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        async with self._slots:
            reused = reuse and bool(self._idle)
            conn = self._idle.pop() if reused else await self.connect()
            try:
                yield conn
            except TimeoutError as exc:
                await _discard(conn)
                raise BackendUnavailable(
                    f"PostgreSQL ({self.url}) did not answer within {self.options.timeout:g} s"
                ) from exc
            except psycopg.Error as exc:
                if conn.closed or conn.broken:
                    await _discard(conn)
                    if reused and isinstance(exc, psycopg.OperationalError):
                        await self.close()  # its idle siblings are likely dead too
                        raise _Stale from exc
                else:
                    self._idle.append(conn)
                raise self.translated(exc) from exc
            except BaseException:
                await _discard(conn)  # cancelled mid-statement: its state is unknown
                raise
            else:
                self._idle.append(conn)

    def translated(self, exc: psycopg.Error) -> FencelockError:
        """The fencelock error for a psycopg one."""
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        user = self.options.user or "(default user)"
        if isinstance(exc, pgerrors.InsufficientPrivilege):
            return ConfigError(
                f"PostgreSQL user {user} may not use fencelock's table in schema "
                f"{self.options.schema!r} ({self.url}): {text}. Grant it CREATE and USAGE on "
                f"the schema, or let an owner run `fencelock init --url ...` and grant "
                f"SELECT, INSERT, UPDATE, DELETE on {self.statements.table} and "
                f"{self.statements.queue}, and USAGE on {self.statements.sequence} and "
                f"{self.statements.queue}_seq_seq"
            )
        if isinstance(exc, pgerrors.InvalidSchemaName):
            return ConfigError(
                f"schema {self.options.schema!r} does not exist in the database ({self.url})"
            )
        if "password authentication failed" in text or "no password supplied" in text:
            return BackendUnavailable(f"PostgreSQL refused our credentials ({self.url}): {text}")
        if "does not exist" in text and "database" in text:
            return ConfigError(f"{self.url}: {text}")
        if isinstance(exc, pgerrors.QueryCanceled):
            return BackendUnavailable(f"PostgreSQL ({self.url}) cancelled a statement: {text}")
        if isinstance(exc, psycopg.OperationalError):
            return BackendUnavailable(f"PostgreSQL at {self.url} unreachable: {text}")
        return BackendUnavailable(f"PostgreSQL ({self.url}): {text}")

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            await _discard(conn)

    def forget(self) -> None:
        """In a forked child: the parent's connections are kept, unused (closing one would
        tell the server the parent's session is over)."""
        forking.abandon(list(self._idle))
        self._idle = []
        self._slots = asyncio.Semaphore(MAX_CONNECTIONS)


class _Stale(Exception):
    """A connection from the idle list turned out dead: run the statement on a new one."""


async def _discard(conn: psycopg.AsyncConnection[Any]) -> None:
    with contextlib.suppress(Exception):
        await conn.close()
