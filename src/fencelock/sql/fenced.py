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
    count does not tell (:attr:`Dialect.upsert_count_certain`), :func:`_counted_matched`.
    """
    if write.upsert and not dialect.upsert_count_certain:
        return (yield from _counted_matched(dialect, write, name))
    build = dialect.fenced_upsert if write.upsert else dialect.fenced_update
    statement = build(write)
    for _ in range(_TRIES):
        written = yield Execute(statement)
        if written == 1 or (write.upsert and written == 2):  # MySQL counts an upsert's update as 2
            return
        if written > 1:
            raise ConfigError(
                f"{write.row} matched {written} rows: a fence guards one row,"
                " so give its unique key"
            )
        rows = yield Fetch(dialect.read_fence(write))
        if not rows:
            if write.upsert:
                continue  # deleted since: insert it
            raise RowNotFound(write.row)
        last = rows[0][write.fence_column]
        _refuse_if_stale(write, last, name)
        if last == write.token and not dialect.unchanged_rows_counted:
            # MySQL counts changed rows only: the write met this fence (a fence never
            # goes down, and from below the write would have changed it), passed, and
            # found the row already as it would have left it
            return
    raise ConflictError(write.row, _TRIES)


def _counted_matched(dialect: Dialect, write: FencedWrite, name: str | None) -> Flow[None]:
    """The upsert on a MySQL connection that counts rows matched, where it counts 2 for
    a row it updated and 1 both for a row it inserted and for one it left as it was. The
    fence is read first without a lock (the transaction's snapshot: no gap lock for a
    row not there yet, which two transactions inserting one name would deadlock on),
    then the upsert, then on a count of 1 the fence as it left it (a locking read, of a
    row that is there now). At the token and not at the token before: it inserted the
    row (or raised it: another statement of the same lease's can only have written the
    same token)."""
    column = write.fence_column
    for _ in range(_TRIES):
        seen = yield Fetch(dialect.select(write.table, write.key, columns=(column,)))
        before = seen[0][column] if seen else None
        written = yield Execute(dialect.fenced_upsert(write))
        if written == 2:
            return
        if written > 2:
            raise ConfigError(
                f"{write.row} matched {written} rows: a fence guards one row,"
                " so give its unique key"
            )
        rows = yield Fetch(dialect.read_fence(write))
        if not rows:
            continue  # deleted since: insert it
        last = rows[0][column]
        if last == write.token and (write.allow_equal or before != write.token):
            return
        _refuse_if_stale(write, last, name)
    raise ConflictError(write.row, _TRIES)


def _refuse_if_stale(write: FencedWrite, last: object, name: str | None) -> None:
    """StaleToken, counted, if the fence ``last`` is above the token, or at it without
    ``allow_equal``."""
    token = write.token
    if last is None:
        return  # NULL: no token was ever accepted
    fence = int(last)  # type: ignore[call-overload]
    if fence > token or (fence == token and not write.allow_equal):
        # counted by table: a row's key is no name
        REGISTRY.rejected(name or f"{table_name(write.table)}/-")
        raise StaleToken(name or write.row, token, fence)
