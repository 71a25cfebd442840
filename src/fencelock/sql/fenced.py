"""The SQL fencing guard: the write and the token check are one statement, in the
caller's transaction, so a holder whose lease was taken over cannot write after the
holder that took it::

    UPDATE payments SET status = %(v0)s, fence_token = %(token)s
    WHERE order_id = %(k0)s AND (fence_token IS NULL OR fence_token < %(token)s)

The upsert form inserts the row if it is not there yet (``INSERT … ON CONFLICT (key)
DO UPDATE … WHERE existing.fence_token < excluded.fence_token``; on MySQL ``INSERT … ON
DUPLICATE KEY UPDATE c = IF(newer, new, c), …``). The fence lives in the protected row
itself (a ``bigint`` column, :func:`fence_column_ddl`), so there is nothing else to
install.

A rejected write raises :class:`~fencelock.StaleToken`, as the guards of
:mod:`fencelock.fencing` do, and is counted the same way.

Whether the write was accepted is told by its row count: 1 (on MySQL, 2 for an upsert
that updated). When it counts no row, the fence is read back, in the caller's transaction
if there is one (on MySQL by a locking read, which meets the latest committed row as the
write did, where a plain one would read a ``REPEATABLE READ`` snapshot): above the token,
or equal without ``allow_equal``, the write was refused. MySQL counts only the rows a
statement changed, so there a write that counts 0 and reads back a fence equal to its
token (with ``allow_equal``) was accepted, with nothing to change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from fencelock.errors import ConfigError, ConflictError, RowNotFound, StaleToken
from fencelock.metrics import REGISTRY
from fencelock.sql.connections import abind, bind
from fencelock.sql.dialect import Dialect
from fencelock.sql.flow import Execute, Fetch, Flow, arun, run
from fencelock.sql.statement import FencedWrite, Table, table_name

if TYPE_CHECKING:
    from fencelock.sql.connections import AsyncConnection, Connection

# A rejected write whose fence, read again, would have let it through (the fence was
# lowered meanwhile, by hand) is sent again this many times in all.
_TRIES = 3

DialectName = Literal["postgresql", "mysql"]


def fenced_write(
    conn: Connection,
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
    missing (the key columns need a unique index: without one, PostgreSQL refuses the
    statement, MySQL inserts another row); otherwise a missing row raises
    :class:`RowNotFound`.
    """
    dialect, session = bind(conn)
    write = FencedWrite(table, key, token, values, fence_column, upsert, allow_equal)
    run(fenced_flow(dialect, write), session)


async def afenced_write(
    conn: AsyncConnection,
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
    write = FencedWrite(table, key, token, values, fence_column, upsert, allow_equal)
    await arun(fenced_flow(dialect, write), session)


def fence_column_ddl(
    table: Table, column: str = "fence_token", *, dialect: DialectName = "postgresql"
) -> str:
    """The one statement that gives ``table`` its fence column, to run without
    parameters. PostgreSQL: ``ALTER TABLE "payments" ADD COLUMN IF NOT EXISTS
    "fence_token" bigint``. ``dialect="mysql"`` (MySQL, MariaDB): ``ALTER TABLE
    `payments` ADD COLUMN `fence_token` BIGINT NULL``, which fails (error 1060, duplicate
    column) if the column is there already: MySQL has no ``IF NOT EXISTS`` for a column."""
    if dialect == "postgresql":
        from fencelock.sql.postgresql import POSTGRESQL

        return POSTGRESQL.fence_column_ddl(table, column)
    if dialect == "mysql":
        from fencelock.sql.mysql import MYSQL

        return MYSQL.fence_column_ddl(table, column)
    raise ConfigError(f"dialect must be 'postgresql' or 'mysql', not {dialect!r}")


FENCES = "fencelock_fences"
"""The fence table's usual name: one row per fenced name, its last accepted token."""


def fence_check(
    key: str, token: int, *, table: Table = FENCES, allow_equal: bool = False
) -> FencedWrite:
    """The fence table's check for ``key``: an upsert of the row ``(key, token)`` that only
    ever raises the stored token. The check :func:`fencelock.fencing.sqlite_fence` and
    :func:`fencelock.integrations.sqlalchemy.fence` run, with :func:`fenced_flow`."""
    if not isinstance(key, str) or not key:
        raise ConfigError(f"a fence's key is a non-empty string (the lock's name), not {key!r}")
    return FencedWrite(table, {"key": key}, token, {}, "token", True, allow_equal)


def fenced_flow(dialect: Dialect, write: FencedWrite, name: str | None = None) -> Flow[None]:
    """The conditional write; if it counted no row, the fence read back: for the error,
    or (MySQL) to tell a refused write from one that had nothing to change.

    A refusal raises StaleToken, for ``name`` (a fence table's key: the lock's name) or
    the row, and is counted under ``name`` or the table's name. Where an upsert's row
    count does not tell (:attr:`Dialect.upsert_count_certain`), the ``UPDATE`` goes
    first, the upsert only for a missing row, and its fence is read back."""
    certain = dialect.upsert_count_certain
    inserting = write.upsert and certain
    statement = dialect.fenced_upsert(write) if inserting else dialect.fenced_update(write)
    for _ in range(_TRIES):
        written = yield Execute(statement)
        ambiguous = inserting and not certain  # an insert and a refusal both count 1
        if (written == 1 and not ambiguous) or (inserting and written == 2):
            return  # MySQL counts an upsert's update as 2
        if written > 1:
            raise ConfigError(
                f"{write.row} matched {written} rows: a fence guards one row,"
                " so give its unique key"
            )
        rows = yield Fetch(dialect.read_fence(write))
        if not rows:
            if write.upsert:
                # deleted since, or never there: insert it
                statement, inserting = dialect.fenced_upsert(write), True
                continue
            raise RowNotFound(write.row)
        last = rows[0][write.fence_column]
        token = write.token
        if ambiguous and last == token:
            # an upsert that counted rows matched found no row to update a moment ago,
            # and has left the fence at its token: it inserted the row
            return
        if last is not None and (last > token or (last == token and not write.allow_equal)):
            # counted by table: a row's key is no name
            REGISTRY.rejected(name or f"{table_name(write.table)}/-")
            raise StaleToken(name or write.row, token, int(last))
        if last == token and not dialect.unchanged_rows_counted:
            # MySQL counts changed rows only: the write met this fence (a fence never
            # goes down, and from below the write would have changed it), passed, and
            # found the row already as it would have left it
            return
    raise ConflictError(write.row, _TRIES)
