"""The database side of data integrity, without any lock backend (PostgreSQL through
psycopg 3, MySQL and MariaDB through PyMySQL and aiomysql; each helper has an asyncio
twin, prefixed ``a``):

- :func:`optimistic_update`: a version column, checked and bumped by the write; a
  conflict is retried with jittered backoff, a bounded number of times.
- :func:`for_update`: the row locked in the caller's transaction (``FOR UPDATE``,
  ``NOWAIT``, ``SKIP LOCKED``, a lock timeout), as a context manager.
- :func:`fenced_write`: a write accepted only with a newer fencing token than the
  row's fence (``lease.token``), checked in the same statement; :func:`fence_column_ddl`
  adds the column.

On MySQL a deadlock inside a helper's savepoint rolls back the caller's whole
transaction: :class:`TransactionLost` says so.

Tables and columns are quoted identifiers (on PostgreSQL ``"Seats"`` is not ``seats``),
values are always parameters. See docs/sql-patterns.md.
"""

from fencelock.errors import ConflictError, LockTimeout, RowNotFound, StaleToken
from fencelock.sql.backoff import RetryPolicy
from fencelock.sql.errors import TransactionLost
from fencelock.sql.fenced import afenced_write, fence_column_ddl, fenced_write
from fencelock.sql.optimistic import OptimisticResult, aoptimistic_update, optimistic_update
from fencelock.sql.pessimistic import afor_update, for_update
from fencelock.sql.statement import LockMode, Row, Table

__all__ = [
    "ConflictError",
    "LockMode",
    "LockTimeout",
    "OptimisticResult",
    "RetryPolicy",
    "Row",
    "RowNotFound",
    "StaleToken",
    "Table",
    "TransactionLost",
    "afenced_write",
    "afor_update",
    "aoptimistic_update",
    "fence_column_ddl",
    "fenced_write",
    "for_update",
    "optimistic_update",
]
