"""This client's connections to PostgreSQL: a few for statements, and the errors they raise.

Statements run in autocommit on connections taken from a small idle list (made as
needed, at most :data:`MAX_CONNECTIONS` at once). A connection that failed or timed
out mid-statement is closed, never reused: its state is unknown. Every psycopg error
becomes a fencelock error here, naming what went wrong.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pgerrors
from psycopg import waiting
from psycopg.abc import PQGen
from psycopg.conninfo import make_conninfo

from fencelock import blocking_call, clock, forking
from fencelock.aio import opened_within, within
from fencelock.backends.postgresql.options import PostgresOptions
from fencelock.backends.postgresql.statements import SchemaObjects, Statements
from fencelock.errors import BackendUnavailable, ConfigError, FencelockError

MAX_CONNECTIONS = 8
# psycopg's default between checks of a wait (for Ctrl-C); its own value is private.
WAIT_INTERVAL = 0.1
# Whether this psycopg's blocking wait takes a timeout, and tells its generator when a
# wait interval passed with nothing ready (3.2 on): only then can a stepped statement
# be cut off at the call's end, so only then does the blocking client step.
STEPS = {"interval", "timeout"} <= set(inspect.signature(waiting.wait).parameters)


RV = TypeVar("RV")


def _until(gen: PQGen[RV], ends: float, limit: float) -> PQGen[RV]:
    """``gen``, ended by :class:`~fencelock.blocking_call.CallEnded` once a wait that psycopg
    reports as over with nothing ready (a falsy readiness) finds the call's end passed."""
    state = next(gen)
    while True:
        ready = yield state
        if not ready and clock.now() >= ends:
            gen.close()
            raise blocking_call.CallEnded(f"PostgreSQL did not answer within {limit:.3g}s")
        try:
            state = gen.send(ready)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


# What a CREATE … IF NOT EXISTS raises when another session created the same object
# between its check and its insert into the catalog: the row's type (pg_type's unique
# index), the relation, or a table's row type ("type … already exists"). Sent again, it
# finds the object and does nothing.
_CATALOG_RACE = (pgerrors.UniqueViolation, pgerrors.DuplicateTable, pgerrors.DuplicateObject)


class SteppedConnection(psycopg.AsyncConnection[Any]):
    """psycopg's asyncio connection, whose every wait for the server can also block
    the calling thread, when the blocking client steps the backend
    (:mod:`fencelock.blocking_call`): psycopg's statements are generators, run by this one
    method."""

    async def wait(
        self, gen: PQGen[RV], interval: float = WAIT_INTERVAL, timeout: float | None = None
    ) -> RV:
        if not blocking_call.active():
            if timeout is None:  # psycopg before 3.3.6 has no timeout here (nor asks for one)
                return await super().wait(gen, interval)
            return await super().wait(gen, interval, timeout)
        limit, cut = blocking_call.wait_limit(timeout)
        try:
            if not cut:  # its own timeout, as psycopg means it
                return waiting.wait(gen, self.pgconn.socket, interval=interval, timeout=timeout)
            assert limit is not None, "a call's end is a time"
            bounded = _until(gen, clock.now() + limit, limit)
            every = max(min(interval, limit), 0.001)
            return waiting.wait(bounded, self.pgconn.socket, interval=every)
        except BaseException:
            self.pgconn.finish()  # interrupted mid-statement: its state is unknown
            raise


class Connections:
    """Connections for ``options``; ``url`` (redacted) goes into every error message."""

    def __init__(
        self, options: PostgresOptions, url: str, objects: SchemaObjects | None = None
    ) -> None:
        self.options, self.url = options, url
        self.objects: SchemaObjects = objects or Statements(options.schema)
        self._idle: list[psycopg.AsyncConnection[Any]] = []
        self._slots = asyncio.Semaphore(MAX_CONNECTIONS)
        self._schema_ready = False

    async def connect(self, **settings: str) -> psycopg.AsyncConnection[Any]:
        """A new autocommit connection (the listener's, a session's, or one for
        statements), with the statement and lock timeouts and ``settings`` set.

        Set by ``set_config`` (one statement) once connected, not as startup options,
        which PgBouncer refuses (in session mode a setting is the session's; transaction
        mode is refused by :meth:`ensure_schema`)."""
        timeout_ms = str(round(self.options.timeout * 1000))
        values = {"statement_timeout": timeout_ms, "lock_timeout": timeout_ms, **settings}
        # The connect timeout for each host in turn, as libpq gives it; libpq's own is
        # whole seconds and 2 at least, so the URL's is kept here.
        limit = self.options.connect_timeout * len(self.options.hosts)
        try:
            return await opened_within(limit, self._connect(values), close=_close_now)
        except TimeoutError as exc:
            raise BackendUnavailable(
                f"PostgreSQL ({self.url}) did not answer within {limit:g} s"
            ) from exc
        except psycopg.Error as exc:
            raise self.translated(exc) from exc

    async def _connect(self, settings: dict[str, str]) -> psycopg.AsyncConnection[Any]:
        conn = await SteppedConnection.connect(
            make_conninfo(**self.options.connect_kwargs()), autocommit=True
        )
        try:
            calls = ", ".join("set_config(%s, %s, false)" for _ in settings)
            await conn.execute(f"SELECT {calls}", [x for pair in settings.items() for x in pair])
        except BaseException:
            await _discard(conn)
            raise
        return conn

    async def fetchall(
        self, query: str, params: dict[str, Any], own_pid: str | None = None
    ) -> list[tuple[Any, ...]]:
        """Run one statement; its rows. ``own_pid``: a parameter given the server process
        of the connection the statement runs on."""
        await self.ensure_schema()
        return await self._run(query, params, own_pid)

    async def _run(
        self, query: str, params: dict[str, Any], own_pid: str | None = None
    ) -> list[tuple[Any, ...]]:
        """On a connection that died while idle (the server restarted, or an admin
        terminated it), the statement runs once more on a new one: every statement
        fencelock runs may run twice (:mod:`.sql`)."""
        try:
            return await self._once(query, params, own_pid, reuse=True)
        except _Stale:
            return await self._once(query, params, own_pid, reuse=False)

    async def _once(
        self, query: str, params: dict[str, Any], own_pid: str | None, reuse: bool
    ) -> list[tuple[Any, ...]]:
        async with self._connection(reuse) as conn:
            if own_pid is not None:
                params = {**params, own_pid: conn.info.backend_pid}
            cursor = await within(self.options.timeout + 1, conn.execute(query, params))
            return await cursor.fetchall() if cursor.description else []

    async def ensure_schema(self) -> None:
        """Create the table and sequence once (``IF NOT EXISTS``: racing clients agree)."""
        if self._schema_ready:
            return
        await self._refuse_transaction_pooling()
        if (await self._run(self.objects.present, {}))[0][0]:
            self._schema_ready = True
            return
        for statement in self.objects.create:
            for _ in range(3):  # two first users at once: one CREATE loses a catalog race
                try:
                    await self._run(statement, {})
                    break
                except ConfigError:
                    raise
                except FencelockError as exc:
                    if not isinstance(exc.__cause__, _CATALOG_RACE):
                        raise
        self._schema_ready = True

    async def _refuse_transaction_pooling(self) -> None:
        """Two connections of ours that reach the same server process one after the
        other are a pooler's (PgBouncer in transaction or statement mode hands the
        process our first connection just left to the next one): ``LISTEN``, session
        settings and session locks do not work through it."""
        first = await self.connect()
        second: psycopg.AsyncConnection[Any] | None = None
        try:
            pid = await _backend_pid(first)
            second = await self.connect()
            if await _backend_pid(second) == pid:
                raise ConfigError(
                    f"{self.url} reaches PostgreSQL through a pooler in transaction (or "
                    "statement) mode, such as PgBouncer's pool_mode = transaction: its "
                    "connections are not sessions, so LISTEN and session locks do not work. "
                    "Connect fencelock to PostgreSQL directly, or through session pooling"
                )
        except psycopg.Error as exc:
            raise self.translated(exc) from exc
        finally:
            for conn in (first, second):
                if conn is not None:
                    await _discard(conn)

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
                f"{self.objects.privileges}"
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


async def _backend_pid(conn: psycopg.AsyncConnection[Any]) -> int:
    cursor = await conn.execute("SELECT pg_backend_pid()")
    row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


class _Stale(Exception):
    """A connection from the idle list turned out dead: run the statement on a new one."""


def _close_now(conn: psycopg.AsyncConnection[Any]) -> None:
    """Closed without awaiting (libpq's finish): for a connection nobody will use."""
    conn.pgconn.finish()


async def _discard(conn: psycopg.AsyncConnection[Any]) -> None:
    with contextlib.suppress(Exception):
        await conn.close()
