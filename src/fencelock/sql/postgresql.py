"""The PostgreSQL dialect: every statement the patterns run there, in one place.

Identifiers are quoted by ``psycopg.sql.Identifier`` (``"`` doubled) and then have their
``%`` doubled too: each statement here is sent with parameters, and psycopg would read a
``%`` in a quoted name as the start of a placeholder. The statements PostgreSQL writes as
MySQL does are :class:`~fencelock.sql.dialect.Dialect`'s.
"""

from __future__ import annotations

import math
from typing import Any

from fencelock.sql.dialect import Dialect
from fencelock.sql.statement import (
    FencedWrite,
    Statement,
    Table,
    column_name,
    table_parts,
)


class PostgreSQL(Dialect):
    """The statements of PostgreSQL (9.5 and later), as ``psycopg.sql.SQL``."""

    returning = True
    session_lock_timeout = False  # SET LOCAL: it ends with the transaction
    unchanged_rows_counted = True
    # a plain read meets what the UPDATE met: the latest committed row (READ COMMITTED),
    # or the transaction's snapshot (REPEATABLE READ, as the UPDATE did)
    fence_read_lock = None

    def quote(self, *parts: str) -> str:
        from psycopg import sql

        return sql.Identifier(*parts).as_string()

    def statement(self, query: str, params: dict[str, Any] | None = None) -> Statement:
        from psycopg import sql

        return Statement(sql.SQL(query), params or {})

    def fenced_upsert(self, write: FencedWrite) -> Statement:
        """``INSERT … AS existing … ON CONFLICT (key) DO UPDATE SET c = excluded.c, …
        WHERE newer``: the row keeps every column unless the token is newer."""
        return self.on_conflict_upsert(write)

    def lock_timeout_setting(self) -> Statement:
        return self.statement("SELECT current_setting('lock_timeout') AS setting")

    def set_lock_timeout(self, seconds: float) -> Statement:
        # SET LOCAL, as a function so the value is a parameter. 0 would mean "no limit".
        milliseconds = max(1, math.ceil(seconds * 1000))
        return self.restore_lock_timeout(f"{milliseconds}ms")

    def restore_lock_timeout(self, setting: object) -> Statement:
        query = "SELECT set_config('lock_timeout', %(setting)s, true)"
        return self.statement(query, {"setting": setting})

    def lock_unavailable(self, error: BaseException) -> bool:
        from psycopg import errors

        return isinstance(error, errors.LockNotAvailable)  # 55P03: NOWAIT, lock_timeout

    def conflict(self, error: BaseException) -> bool:
        from psycopg import errors

        return isinstance(error, (errors.SerializationFailure, errors.DeadlockDetected))

    def fence_column_ddl(self, table: Table, column: str) -> str:
        name = self.quote(*table_parts(table))
        return (
            f"ALTER TABLE {name} ADD COLUMN IF NOT EXISTS {self.quote(column_name(column))} bigint"
        )


class PlainPostgreSQL(PostgreSQL):
    """The same statements as plain text (``"`` doubled in a quoted name, as psycopg's
    ``Identifier`` does), for a driver other than psycopg 3: what the SQLAlchemy
    integration runs, on any of SQLAlchemy's PostgreSQL drivers. Needs no psycopg."""

    def quote(self, *parts: str) -> str:
        return ".".join('"' + part.replace('"', '""') + '"' for part in parts)

    def statement(self, query: str, params: dict[str, Any] | None = None) -> Statement:
        return Statement(query, params or {})


POSTGRESQL = PostgreSQL()
PLAIN_POSTGRESQL = PlainPostgreSQL()
