"""The SQL fencing guard: the write and the token check are one statement, in the
caller's transaction, so a holder whose lease was taken over cannot write after the
holder that took it::

    UPDATE payments SET status = %(v0)s, fence_token = %(token)s
    WHERE order_id = %(k0)s AND (fence_token IS NULL OR fence_token < %(token)s)

The upsert form inserts the row if it is not there yet (``INSERT … ON CONFLICT (key)
DO UPDATE … WHERE existing.fence_token < excluded.fence_token``). The fence lives in
the protected row itself (a ``bigint`` column, :func:`fence_column_ddl`), so there is
nothing else to install. A rejected write raises :class:`~fencelock.StaleToken`, as the
guards of :mod:`fencelock.fencing` do, and is counted the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fencelock.errors import ConfigError, ConflictError, RowNotFound, StaleToken
from fencelock.metrics import COUNTERS, FENCING_REJECTIONS
from fencelock.sql.connections import abind, bind
from fencelock.sql.dialect import Dialect
from fencelock.sql.flow import Execute, Fetch, Flow, arun, run
from fencelock.sql.statement import Table, column_name, describe, key_columns, value_columns

if TYPE_CHECKING:
    import psycopg

# A rejected write whose fence, read again, would have let it through (the fence was
# lowered meanwhile, by hand) is sent again this many times in all.
_TRIES = 3


def fenced_write(
    conn: psycopg.Connection[Any],
    table: Table,
    key: Mapping[str, Any],
    token: int,
    values: Mapping[str, Any],
    *,
    fence_column: str = "fence_token",
    upsert: bool = False,
    allow_equal: bool = False,
) -> None:
    """Set ``values`` on the row at ``key`` (its unique key) and its fence to ``token``,
    in one statement, only if the fence is NULL or below ``token``.

    Runs in the caller's transaction: do the protected writes in the same one, so they
    commit or roll back together. Raises :class:`StaleToken` (``.last``: the fence) if
    the token is not newer; the row is then unchanged. ``allow_equal=True`` lets one
    lease write again with its own token. ``upsert=True`` inserts the row if it is
    missing (the key columns need a unique index); otherwise a missing row raises
    :class:`RowNotFound`.
    """
    dialect, session = bind(conn)
    run(fenced_flow(dialect, table, key, token, values, fence_column, upsert, allow_equal), session)


async def afenced_write(
    conn: psycopg.AsyncConnection[Any],
    table: Table,
    key: Mapping[str, Any],
    token: int,
    values: Mapping[str, Any],
    *,
    fence_column: str = "fence_token",
    upsert: bool = False,
    allow_equal: bool = False,
) -> None:
    """:func:`fenced_write` on an asyncio connection."""
    dialect, session = abind(conn)
    flow = fenced_flow(dialect, table, key, token, values, fence_column, upsert, allow_equal)
    await arun(flow, session)


def fence_column_ddl(table: Table, column: str = "fence_token") -> str:
    """The one statement that gives ``table`` its fence column (PostgreSQL):
    ``ALTER TABLE "payments" ADD COLUMN IF NOT EXISTS "fence_token" bigint``."""
    from fencelock.sql.postgresql import POSTGRESQL

    return POSTGRESQL.fence_column_ddl(table, column)


def fenced_flow(
    dialect: Dialect,
    table: Table,
    key: Mapping[str, Any],
    token: int,
    values: Mapping[str, Any],
    fence_column: str,
    upsert: bool,
    allow_equal: bool,
) -> Flow[None]:
    """The conditional write; if it was refused, the fence read back for the error."""
    if isinstance(token, bool) or not isinstance(token, int):
        raise ConfigError(f"a fencing token is an int (lease.token), not {token!r}")
    fence = column_name(fence_column, "fence column")
    keys = key_columns(key)
    reserved = (fence, *(column for column, _ in keys)) if upsert else (fence,)
    value_columns(values, reserved=reserved)
    if upsert and any(value is None for _, value in keys):
        raise ConfigError(f"an upsert's key cannot be NULL: {describe(table, key)}")
    build = dialect.fenced_upsert if upsert else dialect.fenced_update
    write = build(table, key, values, fence, token, allow_equal)
    for _ in range(_TRIES):
        written = yield Execute(write)
        if written == 1:
            return
        if written > 1:
            raise ConfigError(
                f"{describe(table, key)} matched {written} rows: a fence guards one row,"
                " so give its unique key"
            )
        rows = yield Fetch(dialect.select(table, key, columns=(fence,)))
        if not rows:
            if upsert:
                continue  # deleted since: insert it
            raise RowNotFound(describe(table, key))
        last = rows[0][fence]
        if last is not None and (last > token or (last == token and not allow_equal)):
            COUNTERS.add(FENCING_REJECTIONS)
            raise StaleToken(describe(table, key), token, int(last))
    raise ConflictError(describe(table, key), _TRIES)
