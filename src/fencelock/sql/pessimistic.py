"""Pessimistic lock: take the row's lock when reading it, ``SELECT … FOR UPDATE``, and
hold it to the end of the caller's transaction; any other transaction that wants to
change or lock the row waits for that (or, with ``NOWAIT``, fails at once; with ``SKIP
LOCKED``, passes it over).

A timeout is set just for the ``SELECT``, and the setting in force before is put back
after it, so the rest of the caller's transaction keeps its own: on PostgreSQL with ``SET
LOCAL lock_timeout`` (as ``set_config(…, true)``), put back once the lock is taken (a lock
not granted aborts the transaction, and the setting ends with it); on MySQL with ``SET
SESSION innodb_lock_wait_timeout`` (whole seconds, at least 1), put back either way.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any

from fencelock.engine.timing import validate_timeout
from fencelock.errors import ConfigError, LockTimeout
from fencelock.sql.connections import abind, bind
from fencelock.sql.dialect import Dialect
from fencelock.sql.flow import Execute, Fetch, Flow, arun, run
from fencelock.sql.statement import LOCK_MODES, LockMode, Row, Table, describe

if TYPE_CHECKING:
    from fencelock.sql.connections import AsyncConnection, Connection


@contextmanager
def for_update(
    conn: Connection,
    table: Table,
    key: Mapping[str, Any],
    *,
    timeout: float | None = None,
    mode: LockMode = "wait",
) -> Iterator[Row | None]:
    """Lock the row at ``key`` until the caller's transaction ends, and give it
    (None if there is none, or, with ``mode="skip_locked"``, if it is locked).

    Use it inside a transaction: ``with conn.transaction(), for_update(conn, …) as row:``;
    on an autocommit connection with no transaction open it raises ConfigError, since
    the lock would end with the ``SELECT``. ``mode="wait"`` waits for the lock, at most
    ``timeout`` seconds if given (on MySQL rounded up to whole seconds); ``"nowait"``
    does not wait. Raises :class:`LockTimeout` (naming the table and key) if the lock is
    not granted; on PostgreSQL the transaction is then aborted, so let it roll back (on
    MySQL only the ``SELECT`` is). A key may match several rows: one of them is locked.

    On MySQL (a PyMySQL connection) "inside a transaction" is: autocommit off, or a
    transaction begun with ``conn.begin()``.
    """
    dialect, session = bind(conn)
    flow = lock_flow(dialect, table, key, mode, timeout)
    if not session.in_transaction():
        raise ConfigError(_no_transaction(table, key))
    yield run(flow, session)


@asynccontextmanager
async def afor_update(
    conn: AsyncConnection,
    table: Table,
    key: Mapping[str, Any],
    *,
    timeout: float | None = None,
    mode: LockMode = "wait",
) -> AsyncIterator[Row | None]:
    """:func:`for_update` on an asyncio connection:
    ``async with conn.transaction(), afor_update(conn, …) as row:`` (aiomysql: after
    ``await conn.begin()``)."""
    dialect, session = abind(conn)
    flow = lock_flow(dialect, table, key, mode, timeout)
    if not session.in_transaction():
        raise ConfigError(_no_transaction(table, key))
    yield await arun(flow, session)


def lock_flow(
    dialect: Dialect, table: Table, key: Mapping[str, Any], mode: LockMode, timeout: float | None
) -> Flow[Row | None]:
    """Set the lock timeout, select the row ``FOR UPDATE``, put the timeout back."""
    if mode not in LOCK_MODES:
        raise ConfigError(f"mode must be one of {', '.join(LOCK_MODES)}, not {mode!r}")
    seconds = validate_timeout(timeout)
    if seconds is not None and mode != "wait":
        raise ConfigError(f"a timeout is for mode='wait': mode={mode!r} never waits")
    if seconds == math.inf:
        seconds = None
    statement = dialect.select(table, key, lock=mode)  # the key and table checked first
    before: object = None
    if seconds is not None:
        (setting,) = yield Fetch(dialect.lock_timeout_setting())
        before = setting["setting"]
        yield Execute(dialect.set_lock_timeout(seconds))
    try:
        rows = yield Fetch(statement)
    except Exception as error:
        if seconds is not None and dialect.session_lock_timeout:  # MySQL: put back anyway
            yield Execute(dialect.restore_lock_timeout(before))
        if dialect.lock_unavailable(error):
            raise LockTimeout(_not_granted(table, key, mode, seconds)) from error
        raise
    if seconds is not None:
        yield Execute(dialect.restore_lock_timeout(before))
    return rows[0] if rows else None


def _not_granted(
    table: Table, key: Mapping[str, Any], mode: LockMode, seconds: float | None
) -> str:
    row = describe(table, key)
    if mode == "nowait":
        return f"row {row} is locked by another transaction (mode='nowait': not waiting)"
    if seconds is not None:
        return f"row {row} still locked by another transaction after the {seconds:g}s timeout"
    return f"row {row} still locked by another transaction when the server's lock timeout ran out"


def _no_transaction(table: Table, key: Mapping[str, Any]) -> str:
    return (
        f"for_update needs a transaction: the connection is in autocommit mode with none "
        f"open, so the lock on {describe(table, key)} would end with the SELECT that takes "
        f"it; wrap the work in a transaction (`with conn.transaction():`, PyMySQL's"
        f" `conn.begin()`)"
    )
