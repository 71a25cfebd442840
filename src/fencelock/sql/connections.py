"""The connections fencelock.sql talks to, and the dialect each speaks: psycopg 3's
``Connection`` and ``AsyncConnection`` (PostgreSQL), PyMySQL's ``Connection`` and
aiomysql's (MySQL, MariaDB). This is the one place that picks the driver; the psycopg
sessions are here, the MySQL ones in :mod:`.mysql_sessions`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from fencelock.errors import ConfigError
from fencelock.sql.dialect import Dialect
from fencelock.sql.flow import AsyncSession, Session
from fencelock.sql.statement import Row, Statement

if TYPE_CHECKING:
    import aiomysql
    import psycopg
    import pymysql
    from psycopg import sql

    Connection: TypeAlias = "psycopg.Connection[Any] | pymysql.connections.Connection[Any]"
    """A blocking connection the helpers take."""
    AsyncConnection: TypeAlias = "psycopg.AsyncConnection[Any] | aiomysql.Connection"
    """An asyncio connection the helpers take."""


def bind(conn: object) -> tuple[Dialect, Session]:
    """The dialect and session of a blocking connection, or ConfigError."""
    return _bound(
        conn,
        {"psycopg": _psycopg, "pymysql": _pymysql},
        "psycopg.Connection or a pymysql.connections.Connection",
    )


def abind(conn: object) -> tuple[Dialect, AsyncSession]:
    """The dialect and session of an asyncio connection, or ConfigError."""
    return _bound(
        conn,
        {"psycopg": _async_psycopg, "aiomysql": _aiomysql},
        "psycopg.AsyncConnection or an aiomysql.Connection",
    )


_S = TypeVar("_S", Session, AsyncSession)
# A driver's connection class, the dialect it speaks and the session wrapping it;
# imported only when a connection of that driver's module comes.
_Driver: TypeAlias = "tuple[type[Any], Dialect, Callable[[Any], _S]]"


def _bound(
    conn: object, drivers: Mapping[str, Callable[[], _Driver[_S]]], expected: str
) -> tuple[Dialect, _S]:
    module = type(conn).__module__
    for prefix, load in drivers.items():
        if module.startswith(prefix):
            connection_type, dialect, session = load()
            if isinstance(conn, connection_type):
                return dialect, session(conn)
    raise ConfigError(_unsupported(conn, expected))


def _psycopg() -> _Driver[Session]:
    import psycopg

    from fencelock.sql.postgresql import POSTGRESQL

    return psycopg.Connection, POSTGRESQL, PsycopgSession


def _async_psycopg() -> _Driver[AsyncSession]:
    import psycopg

    from fencelock.sql.postgresql import POSTGRESQL

    return psycopg.AsyncConnection, POSTGRESQL, AsyncPsycopgSession


def _pymysql() -> _Driver[Session]:
    import pymysql

    from fencelock.sql.mysql import MYSQL
    from fencelock.sql.mysql_sessions import PyMySQLSession

    return pymysql.connections.Connection, MYSQL, PyMySQLSession


def _aiomysql() -> _Driver[AsyncSession]:
    import aiomysql

    from fencelock.sql.mysql import MYSQL
    from fencelock.sql.mysql_sessions import AiomysqlSession

    return aiomysql.Connection, MYSQL, AiomysqlSession


def _unsupported(conn: object, expected: str) -> str:
    return (
        f"fencelock.sql needs a {expected} here, not {type(conn).__module__}.{type(conn).__name__}"
    )


def _query(statement: Statement) -> sql.SQL | sql.Composed:
    from psycopg import sql

    if not isinstance(statement.query, (sql.SQL, sql.Composed)):
        raise TypeError(f"not a PostgreSQL statement: {statement.query!r}")
    return statement.query


class PsycopgSession:
    """A ``psycopg.Connection``: rows as dicts, whatever its own row factory."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def fetch(self, statement: Statement) -> list[Row]:
        from psycopg.rows import dict_row

        with self.conn.cursor(row_factory=dict_row) as cursor:
            cursor.execute(_query(statement), statement.params)
            return cursor.fetchall()

    def execute(self, statement: Statement) -> int:
        with self.conn.cursor() as cursor:
            cursor.execute(_query(statement), statement.params)
            return cursor.rowcount

    def transaction(self) -> AbstractContextManager[object]:
        return self.conn.transaction()

    def in_transaction(self) -> bool:
        return not self.conn.autocommit or _open(self.conn)


class AsyncPsycopgSession:
    """A ``psycopg.AsyncConnection``: rows as dicts, whatever its own row factory."""

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self.conn = conn

    async def fetch(self, statement: Statement) -> list[Row]:
        from psycopg.rows import dict_row

        async with self.conn.cursor(row_factory=dict_row) as cursor:
            await cursor.execute(_query(statement), statement.params)
            return await cursor.fetchall()

    async def execute(self, statement: Statement) -> int:
        async with self.conn.cursor() as cursor:
            await cursor.execute(_query(statement), statement.params)
            return cursor.rowcount

    def transaction(self) -> AbstractAsyncContextManager[object]:
        return self.conn.transaction()

    def in_transaction(self) -> bool:
        return not self.conn.autocommit or _open(self.conn)


def _open(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    from psycopg.pq import TransactionStatus

    return conn.info.transaction_status != TransactionStatus.IDLE
