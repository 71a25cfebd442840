"""The two databases the fencelock.sql tests run on, behind one face (:class:`Database`):
PostgreSQL through psycopg 3, MariaDB through PyMySQL and aiomysql; and what the tests
build on that face: a row as committed, another transaction holding a row's lock.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    asynccontextmanager,
    contextmanager,
)
from typing import Any, Protocol
from urllib.parse import urlsplit

import aiomysql
import psycopg
import pymysql
from hypothesis import strategies as st
from psycopg import sql

from fencelock.sql.dialect import Dialect
from fencelock.sql.fenced import DialectName
from fencelock.sql.mysql import MYSQL
from fencelock.sql.postgresql import POSTGRESQL
from fencelock.sql.statement import Statement
from fencelock.testing import MariaDBServer, PostgreSQLServer

LOCK_WAIT_TIMEOUT = 1205  # MariaDB's answer to NOWAIT as well as to a timeout

name_text = st.text(
    st.characters(exclude_characters="\x00", codec="utf-8"), min_size=1, max_size=12
)
"""A table or column name, anything PostgreSQL takes (quotes, ``%``, any script)."""

# MySQL's identifiers: the BMP only, 64 characters at most, not ending in white space,
# column names compared without case or accents (so each gets a prefix of its own)
mysql_name_text = st.text(
    st.characters(max_codepoint=0xFFFF, exclude_characters="\x00", codec="utf-8"),
    min_size=1,
    max_size=12,
).filter(lambda name: not name[-1].isspace())


class Database(Protocol):
    """A database server as the shared tests drive it, through its drivers."""

    @property
    def dialect(self) -> Dialect:
        """The statements fencelock.sql builds for it."""
        ...

    dialect_name: DialectName
    """Its name for :func:`fencelock.sql.fence_column_ddl`, and its part of the docs page."""
    url_variable: str
    """The environment variable the docs page's examples take its URL from."""
    key_type: str
    """A column type for a short text primary key."""
    names: st.SearchStrategy[list[str]]
    """Four names it takes for a table and three columns, none of them ``version``,
    and no two the same to it."""

    @property
    def url(self) -> str: ...

    def sql(self, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
        """Run one statement (``%s`` placeholders) on a connection of its own; its rows."""
        ...

    def connect(self, *, autocommit: bool = True) -> Any:
        """A new connection (a context manager that closes it)."""
        ...

    def transaction(self, conn: Any) -> AbstractContextManager[object]:
        """A transaction on ``conn``: committed at the end, rolled back if it raises."""
        ...

    def query(self, conn: Any, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
        """Run ``statement`` on ``conn``; its rows."""
        ...

    def not_granted(self, error: BaseException) -> bool:
        """Whether ``error`` is the driver's "row lock not granted"."""
        ...

    def quote(self, name: str) -> str:
        """``name`` as a quoted identifier in a statement run without parameters."""
        ...

    def text(self, statement: Statement) -> str:
        """The text of a statement fencelock.sql built, which must be of the driver's kind."""
        ...

    def set_lock_wait(self, conn: Any, seconds: int) -> None:
        """Make row locks on ``conn`` wait ``seconds``, in the transaction open on it."""
        ...

    def lock_wait(self, conn: Any) -> float:
        """How long row locks on ``conn`` wait now, in seconds."""
        ...

    async def aconnect(self) -> Any:
        """A new asyncio connection in autocommit mode."""
        ...

    def atransaction(self, conn: Any) -> AbstractAsyncContextManager[object]:
        """:meth:`transaction` on an asyncio connection."""
        ...

    async def aquery(self, conn: Any, statement: str, params: Any = None) -> None:
        """Run ``statement`` on an asyncio connection."""
        ...

    async def aclose(self, conn: Any) -> None:
        """Close an asyncio connection."""
        ...


class PostgreSQL:
    """PostgreSQL through psycopg 3."""

    server_fixture = "postgres"
    dialect = POSTGRESQL
    dialect_name: DialectName = "postgresql"
    url_variable = "DSN"
    key_type = "text"
    names = st.lists(name_text, min_size=4, max_size=4, unique=True).filter(
        lambda n: "version" not in n and all(len(name.encode()) <= 48 for name in n)
    )

    def __init__(self, server: PostgreSQLServer) -> None:
        self.server = server

    @property
    def url(self) -> str:
        return self.server.url

    def sql(self, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
        return self.server.sql(statement, params)

    def connect(self, *, autocommit: bool = True) -> psycopg.Connection[Any]:
        return psycopg.connect(self.server.url, autocommit=autocommit)

    def transaction(self, conn: psycopg.Connection[Any]) -> AbstractContextManager[object]:
        return conn.transaction()

    def query(
        self, conn: psycopg.Connection[Any], statement: str, params: Any = None
    ) -> list[tuple[Any, ...]]:
        cursor = conn.execute(statement, params)
        return cursor.fetchall() if cursor.description else []

    def not_granted(self, error: BaseException) -> bool:
        return isinstance(error, psycopg.errors.LockNotAvailable)

    def quote(self, name: str) -> str:
        return '"' + name.replace('"', '""') + '"'

    def text(self, statement: Statement) -> str:
        assert isinstance(statement.query, (sql.SQL, sql.Composed)), statement.query
        return statement.query.as_string()

    def set_lock_wait(self, conn: psycopg.Connection[Any], seconds: int) -> None:
        self.query(conn, f"SET LOCAL lock_timeout = '{seconds}s'")

    def lock_wait(self, conn: psycopg.Connection[Any]) -> float:
        query = "SELECT setting FROM pg_settings WHERE name = 'lock_timeout'"  # in ms
        ((milliseconds,),) = self.query(conn, query)
        return int(milliseconds) / 1000

    async def aconnect(self) -> psycopg.AsyncConnection[Any]:
        return await psycopg.AsyncConnection.connect(self.server.url, autocommit=True)

    def atransaction(
        self, conn: psycopg.AsyncConnection[Any]
    ) -> AbstractAsyncContextManager[object]:
        return conn.transaction()

    async def aquery(
        self, conn: psycopg.AsyncConnection[Any], statement: str, params: Any = None
    ) -> None:
        await conn.execute(statement, params)

    async def aclose(self, conn: psycopg.AsyncConnection[Any]) -> None:
        await conn.close()


class MariaDB:
    """MariaDB through PyMySQL and aiomysql."""

    server_fixture = "mariadb"
    dialect = MYSQL
    dialect_name: DialectName = "mysql"
    url_variable = "MYSQL_URL"
    key_type = "varchar(64)"
    names = st.lists(mysql_name_text, min_size=4, max_size=4).map(
        lambda names: [f"c{n}{name}" for n, name in enumerate(names)]
    )

    def __init__(self, server: MariaDBServer) -> None:
        self.server = server
        url = urlsplit(server.url)
        self.options: dict[str, Any] = {
            "host": url.hostname,
            "port": url.port,
            "user": url.username,
            "password": url.password,
        }
        self.database = url.path.lstrip("/")

    @property
    def url(self) -> str:
        return self.server.url

    def sql(self, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
        return self.server.sql(statement, params)

    def connect(
        self, *, autocommit: bool = True, **options: Any
    ) -> pymysql.connections.Connection[Any]:
        return pymysql.connect(
            **self.options, database=self.database, autocommit=autocommit, **options
        )

    @contextmanager
    def transaction(self, conn: pymysql.connections.Connection[Any]) -> Iterator[None]:
        conn.begin()
        try:
            yield
        except BaseException:
            conn.rollback()
            raise
        conn.commit()

    def query(
        self, conn: pymysql.connections.Connection[Any], statement: str, params: Any = None
    ) -> list[tuple[Any, ...]]:
        with conn.cursor() as cursor:
            cursor.execute(statement, params)
            return list(cursor.fetchall()) if cursor.description else []

    def not_granted(self, error: BaseException) -> bool:
        return error_code(error) == LOCK_WAIT_TIMEOUT

    def quote(self, name: str) -> str:
        return "`" + name.replace("`", "``") + "`"

    def text(self, statement: Statement) -> str:
        assert isinstance(statement.query, str), statement.query
        return statement.query

    def set_lock_wait(self, conn: pymysql.connections.Connection[Any], seconds: int) -> None:
        self.query(conn, f"SET SESSION innodb_lock_wait_timeout = {seconds}")

    def lock_wait(self, conn: pymysql.connections.Connection[Any]) -> float:
        ((seconds,),) = self.query(conn, "SELECT @@SESSION.innodb_lock_wait_timeout")
        return float(seconds)

    async def aconnect(self, **options: Any) -> Any:
        return await aiomysql.connect(
            **self.options, db=self.database, **{"autocommit": True, **options}
        )

    @asynccontextmanager
    async def atransaction(self, conn: Any) -> AsyncIterator[None]:
        await conn.begin()
        try:
            yield
        except BaseException:
            await conn.rollback()
            raise
        await conn.commit()

    async def aquery(self, conn: Any, statement: str, params: Any = None) -> None:
        async with conn.cursor() as cursor:
            await cursor.execute(statement, params)

    async def aclose(self, conn: Any) -> None:
        await conn.ensure_closed()


DATABASES: dict[str, type[PostgreSQL] | type[MariaDB]] = {
    "postgresql": PostgreSQL,
    "mariadb": MariaDB,
}
"""Each database by its name in test ids, the ``db`` fixture's parameter."""


def error_code(error: BaseException | None) -> int | None:
    """The server's error number in a PyMySQL error."""
    return error.args[0] if isinstance(error, pymysql.err.MySQLError) else None


def row(db: Database, table: str, id_: int = 1) -> tuple[Any, ...]:
    """(n, buyer, version, fence_token) of row ``id_``, as committed."""
    return db.sql(f"SELECT n, buyer, version, fence_token FROM {table} WHERE id = %s", (id_,))[0]


class Holder:
    """Another transaction that holds row ``id_`` of ``table`` locked until released."""

    def __init__(self, db: Database, table: str, id_: int = 1) -> None:
        self.db = db
        self.conn = db.connect()
        self.held = True
        db.query(self.conn, "BEGIN")
        db.query(self.conn, f"SELECT * FROM {table} WHERE id = %s FOR UPDATE", (id_,))

    def release(self) -> None:
        if self.held:
            self.held = False
            self.db.query(self.conn, "ROLLBACK")
            self.conn.close()
