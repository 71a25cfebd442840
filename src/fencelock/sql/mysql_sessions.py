"""PyMySQL's ``Connection`` and aiomysql's, as the flows talk to them: rows as dicts
whatever the connection's own cursor class, the row count as MySQL gives it, and
transactions.

Whether a transaction is open is read from the server status flags of the connection's
last OK reply (``SERVER_STATUS_IN_TRANS``, ``SERVER_STATUS_AUTOCOMMIT``, as
``conn.get_autocommit()`` reads them): no round trip, and no ``@@in_transaction``, which
MySQL does not have. With autocommit on, only ``BEGIN`` opens a transaction, and
``COMMIT`` or ``ROLLBACK`` ends it, each answered by an OK reply: the flag is right
(unless an error that rolled the transaction back came since, as a deadlock does; an
error reply carries no status). With autocommit off, any statement opens one, and the
drivers keep no status from the end of a result set: so there, before choosing between
``BEGIN`` and a savepoint, a ``DO 0`` asks the server.

A helper's transaction of its own (:class:`~fencelock.sql.flow.Atomic`) is ``BEGIN`` …
``COMMIT`` when none is open, a savepoint in the one that is otherwise. An error that
rolls InnoDB's whole transaction back (a deadlock, MariaDB's "record has changed since
last read") takes the savepoint with it: the helper then raises :class:`TransactionLost`
rather than carry on outside the caller's transaction.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    asynccontextmanager,
    contextmanager,
)
from typing import TYPE_CHECKING, Any

from pymysql.constants import CLIENT, ER, SERVER_STATUS
from pymysql.cursors import Cursor, DictCursor

from fencelock.errors import ConfigError
from fencelock.sql.errors import TransactionLost
from fencelock.sql.mysql import error_code
from fencelock.sql.statement import Row, Statement

if TYPE_CHECKING:
    import pymysql

_SAVEPOINTS = itertools.count(1)
_STATUS = "DO 0"  # a statement that does nothing, answered by a packet with the status


def check_row_count(conn: Any) -> None:
    """ConfigError if ``conn`` counts the rows an ``UPDATE`` matched rather than those it
    changed (``client_flag=CLIENT.FOUND_ROWS``): a fenced upsert that was refused would
    then count as one that wrote."""
    if conn.client_flag & CLIENT.FOUND_ROWS:
        raise ConfigError(
            "fencelock.sql needs MySQL's row counts as the server gives them by default"
            " (rows changed): this connection was opened with client_flag=CLIENT.FOUND_ROWS,"
            " which counts rows matched; open one without it"
        )


def _text(statement: Statement) -> str:
    if not isinstance(statement.query, str):
        raise TypeError(f"not a MySQL statement: {statement.query!r}")
    return statement.query


def _flagged(conn: Any, flag: int) -> bool:
    return bool((conn.server_status or 0) & flag)


def _in_transaction(conn: Any) -> bool:
    """Whether a row lock taken now would outlive its statement: autocommit is off, or a
    transaction was begun (``conn.begin()``)."""
    return not conn.get_autocommit() or _flagged(conn, SERVER_STATUS.SERVER_STATUS_IN_TRANS)


def _lost(name: str, error: BaseException) -> TransactionLost:
    return TransactionLost(
        f"the server rolled back the whole transaction, savepoint {name} with it"
        f" ({error}): retry the transaction from its start"
    )


class PyMySQLSession:
    """A ``pymysql.connections.Connection``."""

    def __init__(self, conn: pymysql.connections.Connection[Any]) -> None:
        check_row_count(conn)
        self.conn = conn

    def fetch(self, statement: Statement) -> list[Row]:
        with self.conn.cursor(DictCursor) as cursor:
            cursor.execute(_text(statement), statement.params)
            return list(cursor.fetchall())

    def execute(self, statement: Statement) -> int:
        with self.conn.cursor(Cursor) as cursor:
            return cursor.execute(_text(statement), statement.params)

    def transaction(self) -> AbstractContextManager[object]:
        return self._atomic()

    def in_transaction(self) -> bool:
        return _in_transaction(self.conn)

    def _run(self, query: str) -> None:
        with self.conn.cursor(Cursor) as cursor:
            cursor.execute(query)

    @contextmanager
    def _atomic(self) -> Iterator[None]:
        if not self.conn.get_autocommit():
            self._run(_STATUS)
        if _flagged(self.conn, SERVER_STATUS.SERVER_STATUS_IN_TRANS):
            with self._savepoint():
                yield
        else:
            with self._transaction():
                yield

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self.conn.begin()
        try:
            yield
        except BaseException:
            self.conn.rollback()
            raise
        self.conn.commit()

    @contextmanager
    def _savepoint(self) -> Iterator[None]:
        name = f"fencelock_{next(_SAVEPOINTS)}"
        self._run(f"SAVEPOINT {name}")
        try:
            yield
        except BaseException as error:
            try:
                self._run(f"ROLLBACK TO SAVEPOINT {name}")
            except Exception as gone:
                if error_code(gone) == ER.SP_DOES_NOT_EXIST:
                    raise _lost(name, error) from error
                raise
            raise
        self._run(f"RELEASE SAVEPOINT {name}")


class AiomysqlSession:
    """An ``aiomysql.Connection``."""

    def __init__(self, conn: Any) -> None:
        check_row_count(conn)
        self.conn = conn

    async def fetch(self, statement: Statement) -> list[Row]:
        import aiomysql

        async with self.conn.cursor(aiomysql.DictCursor) as cursor:
            await cursor.execute(_text(statement), statement.params)
            return list(await cursor.fetchall())

    async def execute(self, statement: Statement) -> int:
        import aiomysql

        async with self.conn.cursor(aiomysql.Cursor) as cursor:
            count: int = await cursor.execute(_text(statement), statement.params)
            return count

    def transaction(self) -> AbstractAsyncContextManager[object]:
        return self._atomic()

    def in_transaction(self) -> bool:
        return _in_transaction(self.conn)

    async def _run(self, query: str) -> None:
        import aiomysql

        async with self.conn.cursor(aiomysql.Cursor) as cursor:
            await cursor.execute(query)

    @asynccontextmanager
    async def _atomic(self) -> AsyncIterator[None]:
        if not self.conn.get_autocommit():
            await self._run(_STATUS)
        if _flagged(self.conn, SERVER_STATUS.SERVER_STATUS_IN_TRANS):
            async with self._savepoint():
                yield
        else:
            async with self._transaction():
                yield

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[None]:
        await self.conn.begin()
        try:
            yield
        except BaseException:
            await self.conn.rollback()
            raise
        await self.conn.commit()

    @asynccontextmanager
    async def _savepoint(self) -> AsyncIterator[None]:
        name = f"fencelock_{next(_SAVEPOINTS)}"
        await self._run(f"SAVEPOINT {name}")
        try:
            yield
        except BaseException as error:
            try:
                await self._run(f"ROLLBACK TO SAVEPOINT {name}")
            except Exception as gone:
                if error_code(gone) == ER.SP_DOES_NOT_EXIST:
                    raise _lost(name, error) from error
                raise
            raise
        await self._run(f"RELEASE SAVEPOINT {name}")
