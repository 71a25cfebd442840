"""Optimistic update: read the row, compute the change, and write it only if the row's
version is still the one read, bumping it in the same statement::

    UPDATE seats SET buyer = %(v0)s, version = COALESCE(version, 0) + 1
    WHERE seat = %(k0)s AND version = %(expected)s RETURNING *

(MySQL has no ``RETURNING``: there the row is read back in the same transaction.)

No lock is held between the read and the write. When another writer got there first,
the update matches no row, and the whole read-compute-write runs again after a
jittered backoff, a bounded number of times (:class:`~fencelock.sql.backoff.RetryPolicy`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fencelock.errors import ConfigError, ConflictError, RowNotFound
from fencelock.sql.backoff import RetryPolicy
from fencelock.sql.connections import abind, bind
from fencelock.sql.dialect import Dialect
from fencelock.sql.flow import Atomic, Execute, Fetch, Flow, Sleep, arun, run
from fencelock.sql.statement import Row, Table, column_name, describe, value_columns

if TYPE_CHECKING:
    from fencelock.sql.connections import AsyncConnection, Connection

Changes = Callable[[Row], Mapping[str, Any]]


@dataclass(frozen=True)
class OptimisticResult:
    """What an optimistic update wrote."""

    row: Row
    """The row as written (its new version included)."""
    version: Any
    """The row's new version."""
    retries: int
    """How many attempts met a conflict before the one that wrote (0: none did)."""


def optimistic_update(
    conn: Connection,
    table: Table,
    key: Mapping[str, Any],
    changes: Changes,
    *,
    version_column: str = "version",
    attempts: int = 5,
    base_delay: float = 0.01,
    max_delay: float = 0.5,
) -> OptimisticResult:
    """Write ``changes(row)`` to the row at ``key`` if nobody changed it meanwhile;
    otherwise read and compute again, up to ``attempts`` times in all.

    Each attempt runs in ``conn.transaction()``: a transaction of its own, committed
    when it writes, or a savepoint in the caller's. ``changes`` gets the row as a dict
    and returns the columns to set (not the version: that is bumped); an exception it
    raises rolls the attempt back and propagates. Raises :class:`ConflictError` when
    every attempt met a conflict, :class:`RowNotFound` if there is no such row.
    """
    dialect, session = bind(conn)
    policy = RetryPolicy(attempts, base_delay, max_delay)
    return run(optimistic_flow(dialect, table, key, changes, version_column, policy), session)


async def aoptimistic_update(
    conn: AsyncConnection,
    table: Table,
    key: Mapping[str, Any],
    changes: Changes,
    *,
    version_column: str = "version",
    attempts: int = 5,
    base_delay: float = 0.01,
    max_delay: float = 0.5,
) -> OptimisticResult:
    """:func:`optimistic_update` on an asyncio connection."""
    dialect, session = abind(conn)
    policy = RetryPolicy(attempts, base_delay, max_delay)
    return await arun(
        optimistic_flow(dialect, table, key, changes, version_column, policy), session
    )


def optimistic_flow(
    dialect: Dialect,
    table: Table,
    key: Mapping[str, Any],
    changes: Changes,
    version_column: str,
    policy: RetryPolicy,
    jitter: Callable[[], float] = random.random,
) -> Flow[OptimisticResult]:
    """Attempt after attempt, with a backoff between them, until one writes
    (``jitter`` returns floats in [0, 1))."""
    column_name(version_column, "version column")
    for attempt in range(policy.attempts):
        if attempt:
            yield Sleep(policy.delay(attempt - 1, jitter))
        try:
            written = yield Atomic(_attempt(dialect, table, key, changes, version_column))
        except Exception as error:
            if not dialect.conflict(error):  # a serialization failure is a conflict too
                raise
            continue
        if written is not None:
            return OptimisticResult(written, written[version_column], attempt)
    raise ConflictError(describe(table, key), policy.attempts)


def _attempt(
    dialect: Dialect, table: Table, key: Mapping[str, Any], changes: Changes, version_column: str
) -> Flow[Row | None]:
    """Read, compute, write if the version is unchanged: the row written, or None."""
    rows = yield Fetch(dialect.select(table, key))
    if not rows:
        raise RowNotFound(describe(table, key))
    row = rows[0]
    if version_column not in row:
        raise ConfigError(f"{describe(table, key)} has no version column {version_column!r}")
    wanted = changes(dict(row))
    value_columns(wanted, reserved=(version_column,))
    update = dialect.versioned_update(table, key, wanted, version_column, row[version_column])
    if dialect.returning:
        written = yield Fetch(update)
    elif (yield Execute(update)):
        # no RETURNING (MySQL): read the row back in this transaction, which wrote it
        # and holds its lock; by the key as written, in case ``changes`` changed it
        moved = {column: wanted.get(column, value) for column, value in key.items()}
        written = yield Fetch(dialect.select(table, moved))
    else:
        written = []  # the version had moved
    return written[0] if written else None
