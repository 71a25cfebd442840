"""Fencing tokens checked in a SQLAlchemy transaction (SQLAlchemy 1.4 and 2.x, Core and
ORM; PostgreSQL, MySQL and MariaDB, SQLite 3.24 and later).

Two forms, both run in the caller's transaction, so the check commits or rolls back with
the writes it protects:

- :func:`fence` checks and records a lock's token in a fence table (:func:`fence_table`,
  one row per lock name): put it first in the transaction that writes, and a holder whose
  lease was taken over gets :class:`~fencelock.StaleToken` instead of writing;
- :func:`fenced_update` writes one row only if its fence column is below the token (the
  version-column pattern), in one ``UPDATE``.

::

    from sqlalchemy.orm import Session

    from fencelock.integrations.sqlalchemy import fence

    with Session(engine) as session, session.begin():
        fence(session, "orders/42", lease.token)    # StaleToken: the block rolls back
        session.add(Payment(order_id=42, amount=1200))

The statements are :mod:`fencelock.sql`'s, the ones :func:`fencelock.fencing.sqlite_fence`
and :func:`fencelock.sql.fenced_write` run: an upsert that only raises the stored token
(``INSERT … ON CONFLICT (key) DO UPDATE … WHERE existing.token < excluded.token``; on MySQL
``INSERT … ON DUPLICATE KEY UPDATE token = IF(newer, new, token)``), the fence read back
when the row count does not tell. SQLAlchemy opens MySQL connections counting the rows an
``UPDATE`` matched, where a refused upsert counts as an insert does: there the fence is
read before the upsert (a plain read) and after it. A refusal raises
:class:`~fencelock.StaleToken` (``.key``, ``.token``, ``.last``) and is counted in
:mod:`fencelock.metrics` as the guards count theirs.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import TYPE_CHECKING, Any

try:
    from sqlalchemy import BigInteger, Column, MetaData, String, Table, text
    from sqlalchemy.engine import Connection
    from sqlalchemy.orm import Session
except ImportError as missing:  # a plain install
    raise ImportError(
        "fencelock.integrations.sqlalchemy fences SQLAlchemy sessions and needs SQLAlchemy: "
        "pip install 'fencelock[sqlalchemy]'"
    ) from missing

from fencelock.errors import ConfigError, RowNotFound, StaleToken
from fencelock.sql.dialect import Dialect
from fencelock.sql.fenced import FENCES, fence_check, fenced_flow
from fencelock.sql.flow import arun, run
from fencelock.sql.sqlite import named
from fencelock.sql.statement import FencedWrite, Row, Statement

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession
    from sqlalchemy.sql.elements import TextClause

    from fencelock.sql.statement import Table as TableName

__all__ = [
    "FENCES",
    "RowNotFound",
    "StaleToken",
    "afence",
    "afenced_update",
    "fence",
    "fence_table",
    "fenced_update",
]


def fence_table(metadata: MetaData, name: str = FENCES, *, schema: str | None = None) -> Table:
    """The fence table, added to ``metadata``: ``key`` (``String(255)``, the primary
    key: a lock's name) and ``token`` (``BigInteger``, not null: the newest token
    accepted for it). Create it with ``metadata.create_all()`` or a migration
    (docs/integrations/sqlalchemy.md shows Alembic's)."""
    return Table(
        name,
        metadata,
        Column("key", String(255), primary_key=True),
        Column("token", BigInteger, nullable=False),
        schema=schema,
    )


def fence(
    bind: Session | Connection,
    key: str,
    token: int,
    *,
    table: Table | str | None = None,
    allow_equal: bool = False,
) -> None:
    """Check ``token`` against the newest one accepted for ``key`` and record it, in one
    statement inside ``bind``'s transaction (a ``Session``, or a ``Connection``).

    Raises :class:`~fencelock.StaleToken` if ``token`` is not newer (``allow_equal=True``
    accepts the same token again: one lease writing twice); let the transaction roll back
    then, so nothing it wrote lands. ``table`` is the fence table (:func:`fence_table`) or
    its name, by default ``fencelock_fences``.
    """
    connection = _connection(bind)
    check = fence_check(key, token, table=_table_name(table), allow_equal=allow_equal)
    run(fenced_flow(_dialect(connection), check, name=key), _SyncSession(connection))


def fenced_update(
    bind: Session | Connection,
    table_or_model: Table | type[Any],
    where: Mapping[str, Any],
    values: Mapping[str, Any],
    token: int,
    *,
    fence_column: str = "fence_token",
    allow_equal: bool = False,
) -> None:
    """Set ``values`` on the one row ``where`` selects and its ``fence_column`` to
    ``token``, only if that column is NULL or below ``token``, in one ``UPDATE`` inside
    ``bind``'s transaction::

        UPDATE payments SET status = :v0, fence_token = :token
        WHERE order_id = :k0 AND (fence_token IS NULL OR fence_token < :token)

    ``table_or_model`` is a ``Table`` or a mapped class; ``where`` (a unique key) and
    ``values`` map column names to values. Raises :class:`~fencelock.StaleToken` (``.last``:
    the row's fence) if the token is not newer, :class:`~fencelock.RowNotFound` if no row
    matches ``where``. A ``Session`` is flushed first; objects it has loaded from the row
    keep their old state until expired or refreshed.
    """
    connection = _connection(bind, flush=True)
    write = _write(table_or_model, where, values, token, fence_column, allow_equal)
    run(fenced_flow(_dialect(connection), write), _SyncSession(connection))


async def afence(
    bind: AsyncSession | AsyncConnection,
    key: str,
    token: int,
    *,
    table: Table | str | None = None,
    allow_equal: bool = False,
) -> None:
    """:func:`fence` in an ``AsyncSession`` or on an ``AsyncConnection``."""
    connection = await _aconnection(bind)
    check = fence_check(key, token, table=_table_name(table), allow_equal=allow_equal)
    flow = fenced_flow(_dialect(connection), check, name=key)
    await arun(flow, _AsyncSession(connection))


async def afenced_update(
    bind: AsyncSession | AsyncConnection,
    table_or_model: Table | type[Any],
    where: Mapping[str, Any],
    values: Mapping[str, Any],
    token: int,
    *,
    fence_column: str = "fence_token",
    allow_equal: bool = False,
) -> None:
    """:func:`fenced_update` in an ``AsyncSession`` or on an ``AsyncConnection``."""
    connection = await _aconnection(bind, flush=True)
    write = _write(table_or_model, where, values, token, fence_column, allow_equal)
    await arun(fenced_flow(_dialect(connection), write), _AsyncSession(connection))


# --- what the four share ---------------------------------------------------------------


def _dialect(connection: Connection | AsyncConnection) -> Dialect:
    """fencelock.sql's statements for the connection's database."""
    name = connection.dialect.name
    if name == "postgresql":
        from fencelock.sql.postgresql import PLAIN_POSTGRESQL

        return PLAIN_POSTGRESQL
    if name in ("mysql", "mariadb"):
        # every MySQL driver of SQLAlchemy's opens its connections with FOUND_ROWS
        from fencelock.sql.mysql import FOUND_ROWS_MYSQL

        return FOUND_ROWS_MYSQL
    if name == "sqlite":
        from fencelock.sql.sqlite import SQLITE

        return SQLITE
    raise ConfigError(
        "fencelock.integrations.sqlalchemy fences PostgreSQL, MySQL, MariaDB and SQLite,"
        f" not {name!r}"
    )


def _table_name(table: Table | str | None) -> TableName:
    if table is None:
        return FENCES
    if isinstance(table, str):
        return table
    if isinstance(table, Table):
        return table.name if table.schema is None else (table.schema, table.name)
    raise ConfigError(f"a fence table is a sqlalchemy Table or a name, not {table!r}")


def _write(
    table_or_model: Table | type[Any],
    where: Mapping[str, Any],
    values: Mapping[str, Any],
    token: int,
    fence_column: str,
    allow_equal: bool,
) -> FencedWrite:
    table = table_or_model if isinstance(table_or_model, Table) else _mapped(table_or_model)
    name = _table_name(table)
    return FencedWrite(name, where, token, values, fence_column, False, allow_equal)


def _mapped(model: object) -> Table:
    table = getattr(model, "__table__", None)
    if not isinstance(table, Table):
        raise ConfigError(f"fenced_update needs a Table or a class mapped to one, not {model!r}")
    return table


def _legacy(connection: Connection) -> bool:
    """A SQLAlchemy 1.4 ``Connection`` that commits each statement by itself unless a
    transaction was begun (not ``future=True``, 1.4's default). In 2.x every
    ``Connection`` is the future one."""
    from sqlalchemy.future import Connection as FutureConnection

    return not isinstance(connection, FutureConnection)


def _connection(bind: object, *, flush: bool = False) -> Connection:
    if isinstance(bind, Session):
        if flush:
            bind.flush()
        return bind.connection()  # the session's, in its transaction
    if isinstance(bind, Connection):
        if _legacy(bind) and not bind.in_transaction():
            raise ConfigError(
                "fence the write inside its transaction: begin one on this connection"
                " (with conn.begin():), or it commits the check before the write"
            )
        return bind
    raise ConfigError(
        f"a SQLAlchemy Session or Connection is needed here, not {type(bind).__name__}"
    )


async def _aconnection(bind: object, *, flush: bool = False) -> AsyncConnection:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

    if isinstance(bind, AsyncSession):
        if flush:
            await bind.flush()
        return await bind.connection()
    if isinstance(bind, AsyncConnection):
        return bind
    raise ConfigError(
        f"a SQLAlchemy AsyncSession or AsyncConnection is needed here, not {type(bind).__name__}"
    )


def _text(statement: Statement) -> TextClause:
    """A fencelock.sql statement (``%(name)s`` parameters) as SQLAlchemy's ``text()``:
    ``:name`` parameters, and any other ``:`` (in a quoted name) escaped."""
    if not isinstance(statement.query, str):
        raise TypeError(f"not a plain-text statement: {statement.query!r}")
    return text(named(statement.query, colon="\\:"))


class _SyncSession:
    """A ``Connection`` as fencelock.sql's flows talk to one."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    def fetch(self, statement: Statement) -> list[Row]:
        result = self.connection.execute(_text(statement), statement.params)
        return [dict(row) for row in result.mappings()]

    def execute(self, statement: Statement) -> int:
        return self.connection.execute(_text(statement), statement.params).rowcount

    def transaction(self) -> AbstractContextManager[object]:
        return self.connection.begin_nested()

    def in_transaction(self) -> bool:
        return self.connection.in_transaction()


class _AsyncSession:
    """An ``AsyncConnection`` as fencelock.sql's flows talk to one."""

    def __init__(self, connection: AsyncConnection) -> None:
        self.connection = connection

    async def fetch(self, statement: Statement) -> list[Row]:
        result = await self.connection.execute(_text(statement), statement.params)
        return [dict(row) for row in result.mappings()]

    async def execute(self, statement: Statement) -> int:
        result = await self.connection.execute(_text(statement), statement.params)
        return result.rowcount

    def transaction(self) -> AbstractAsyncContextManager[object]:
        return self.connection.begin_nested()

    def in_transaction(self) -> bool:
        return self.connection.in_transaction()
