"""The connections fencelock.sql talks to, and the dialect each speaks: psycopg 3's
``Connection`` and ``AsyncConnection`` (PostgreSQL), PyMySQL's ``Connection`` and
aiomysql's (MySQL, MariaDB). This is the one place that picks the driver; the psycopg
sessions are here, the MySQL ones in :mod:`.mysql_sessions`.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import TYPE_CHECKING, Any

from fencelock.errors import ConfigError
from fencelock.sql.dialect import Dialect
from fencelock.sql.flow import AsyncSession, Session
from fencelock.sql.statement import Row, Statement

if TYPE_CHECKING:
    from typing import TypeAlias

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
    driver = type(conn).__module__
    if driver.startswith("psycopg"):
        import psycopg

        from fencelock.sql.postgresql import POSTGRESQL

        if isinstance(conn, psycopg.Connection):
            return POSTGRESQL, PsycopgSession(conn)
    if driver.startswith("pymysql"):
        import pymysql

        from fencelock.sql.mysql import MYSQL
        from fencelock.sql.mysql_sessions import PyMySQLSession

        if isinstance(conn, pymysql.connections.Connection):
            return MYSQL, PyMySQLSession(conn)
    raise ConfigError(_unsupported(conn, "psycopg.Connection or a pymysql.connections.Connection"))


def abind(conn: object) -> tuple[Dialect, AsyncSession]:
    """The dialect and session of an asyncio connection, or ConfigError."""
    driver = type(conn).__module__
    if driver.startswith("psycopg"):
        import psycopg

        from fencelock.sql.postgresql import POSTGRESQL

        if isinstance(conn, psycopg.AsyncConnection):
            return POSTGRESQL, AsyncPsycopgSession(conn)
    if driver.startswith("aiomysql"):
        import aiomysql

        from fencelock.sql.mysql import MYSQL
        from fencelock.sql.mysql_sessions import AiomysqlSession

        if isinstance(conn, aiomysql.Connection):
            return MYSQL, AiomysqlSession(conn)
    raise ConfigError(_unsupported(conn, "psycopg.AsyncConnection or an aiomysql.Connection"))


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
