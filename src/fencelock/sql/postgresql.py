"""The PostgreSQL dialect: every statement the patterns run there, in one place.

Identifiers go through ``psycopg.sql.Identifier`` (quoted, ``"`` doubled) and then have
their ``%`` doubled too: each statement here is sent with parameters, and psycopg would
read a ``%`` in a quoted name as the start of a placeholder. Values are always
parameters (``%(k0)s`` for the key, ``%(v0)s`` for the values, named by position).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from psycopg import errors, sql

from fencelock.sql.statement import (
    LockMode,
    Statement,
    Table,
    column_name,
    key_columns,
    table_parts,
)

_LOCKS: dict[LockMode, str] = {
    "wait": " FOR UPDATE",
    "nowait": " FOR UPDATE NOWAIT",
    "skip_locked": " FOR UPDATE SKIP LOCKED",
}
# The target row of an upsert, in its DO UPDATE (beside PostgreSQL's own ``excluded``).
_EXISTING = "existing"


def identifier(*parts: str) -> sql.Composable:
    """A quoted identifier that is safe in a statement with parameters."""
    quoted = sql.Identifier(*parts).as_string()
    return sql.SQL(quoted.replace("%", "%%"))


def _table(table: Table) -> sql.Composable:
    return identifier(*table_parts(table))


def _columns(columns: Sequence[str]) -> sql.Composable:
    return sql.SQL(", ").join(identifier(column_name(c)) for c in columns)


def _where(key: Mapping[str, Any], params: dict[str, Any]) -> sql.Composable:
    """``key`` as ``col = %(k0)s AND …`` (``IS NULL`` for a None), its values into ``params``."""
    tests: list[sql.Composable] = []
    for number, (column, value) in enumerate(key_columns(key)):
        if value is None:
            tests.append(sql.SQL("{} IS NULL").format(identifier(column)))
        else:
            params[f"k{number}"] = value
            tests.append(
                sql.SQL("{} = {}").format(identifier(column), sql.Placeholder(f"k{number}"))
            )
    return sql.SQL(" AND ").join(tests)


def _assignments(values: Mapping[str, Any], params: dict[str, Any]) -> list[sql.Composable]:
    """``col = %(v0)s`` for each of ``values``, their values into ``params``."""
    sets: list[sql.Composable] = []
    for number, (column, value) in enumerate(values.items()):
        params[f"v{number}"] = value
        sets.append(
            sql.SQL("{} = {}").format(
                identifier(column_name(column)), sql.Placeholder(f"v{number}")
            )
        )
    return sets


def _fence_test(fence: sql.Composable, token: sql.Composable, allow_equal: bool) -> sql.Composable:
    below = sql.SQL("<=" if allow_equal else "<")
    return sql.SQL("({fence} IS NULL OR {fence} {below} {token})").format(
        fence=fence, below=below, token=token
    )


class PostgreSQL:
    """The statements of PostgreSQL (9.5 and later), as ``psycopg.sql.Composed``."""

    returning = True
    session_lock_timeout = False  # SET LOCAL: it ends with the transaction
    unchanged_rows_counted = True

    def select(
        self,
        table: Table,
        key: Mapping[str, Any],
        *,
        columns: Sequence[str] = (),
        lock: LockMode | None = None,
    ) -> Statement:
        params: dict[str, Any] = {}
        query = sql.SQL("SELECT {columns} FROM {table} WHERE {where} LIMIT 1{lock}").format(
            columns=_columns(columns) if columns else sql.SQL("*"),
            table=_table(table),
            where=_where(key, params),
            lock=sql.SQL(_LOCKS[lock] if lock else ""),
        )
        return Statement(query, params)

    def versioned_update(
        self,
        table: Table,
        key: Mapping[str, Any],
        changes: Mapping[str, Any],
        version_column: str,
        expected: object,
    ) -> Statement:
        params: dict[str, Any] = {}
        version = identifier(column_name(version_column, "version column"))
        bump = sql.SQL("{v} = COALESCE({v}, 0) + 1").format(v=version)
        if expected is None:
            same = sql.SQL("{} IS NULL").format(version)
        else:
            params["expected"] = expected
            same = sql.SQL("{} = %(expected)s").format(version)
        query = sql.SQL("UPDATE {table} SET {sets} WHERE {where} AND {same} RETURNING *").format(
            table=_table(table),
            sets=sql.SQL(", ").join([*_assignments(changes, params), bump]),
            where=_where(key, params),
            same=same,
        )
        return Statement(query, params)

    def fenced_update(
        self,
        table: Table,
        key: Mapping[str, Any],
        values: Mapping[str, Any],
        fence_column: str,
        token: int,
        allow_equal: bool,
    ) -> Statement:
        params: dict[str, Any] = {"token": token}
        fence = identifier(column_name(fence_column, "fence column"))
        sets = [*_assignments(values, params), sql.SQL("{} = %(token)s").format(fence)]
        query = sql.SQL("UPDATE {table} SET {sets} WHERE {where} AND {newer}").format(
            table=_table(table),
            sets=sql.SQL(", ").join(sets),
            where=_where(key, params),
            newer=_fence_test(fence, sql.SQL("%(token)s"), allow_equal),
        )
        return Statement(query, params)

    def fenced_upsert(
        self,
        table: Table,
        key: Mapping[str, Any],
        values: Mapping[str, Any],
        fence_column: str,
        token: int,
        allow_equal: bool,
    ) -> Statement:
        pairs = key_columns(key)
        params: dict[str, Any] = {"token": token}
        params.update({f"k{n}": value for n, (_, value) in enumerate(pairs)})
        params.update({f"v{n}": value for n, value in enumerate(values.values())})
        fence_name = column_name(fence_column, "fence column")
        keys = [column for column, _ in pairs]
        inserted = [*keys, *values, fence_name]
        placeholders = [
            *(sql.Placeholder(f"k{n}") for n in range(len(keys))),
            *(sql.Placeholder(f"v{n}") for n in range(len(values))),
            sql.SQL("%(token)s"),
        ]
        updated = [*values, fence_name]
        query = sql.SQL(
            "INSERT INTO {table} AS {existing} ({columns}) VALUES ({placeholders})"
            " ON CONFLICT ({keys}) DO UPDATE SET {sets} WHERE {newer}"
        ).format(
            table=_table(table),
            existing=identifier(_EXISTING),
            columns=_columns(inserted),
            placeholders=sql.SQL(", ").join(placeholders),
            keys=_columns(keys),
            sets=sql.SQL(", ").join(
                sql.SQL("{c} = excluded.{c}").format(c=identifier(c)) for c in updated
            ),
            newer=_fence_test(
                identifier(_EXISTING, fence_name), identifier("excluded", fence_name), allow_equal
            ),
        )
        return Statement(query, params)

    def read_fence(self, table: Table, key: Mapping[str, Any], fence_column: str) -> Statement:
        # a plain read meets what the UPDATE met: the latest committed row (READ
        # COMMITTED), or the transaction's snapshot (REPEATABLE READ, as the UPDATE did)
        return self.select(table, key, columns=(fence_column,))

    def lock_timeout_setting(self) -> Statement:
        return Statement(sql.SQL("SELECT current_setting('lock_timeout') AS setting"))

    def set_lock_timeout(self, seconds: float) -> Statement:
        # SET LOCAL, as a function so the value is a parameter. 0 would mean "no limit".
        milliseconds = max(1, math.ceil(seconds * 1000))
        return self.restore_lock_timeout(f"{milliseconds}ms")

    def restore_lock_timeout(self, setting: object) -> Statement:
        query = sql.SQL("SELECT set_config('lock_timeout', %(setting)s, true)")
        return Statement(query, {"setting": setting})

    def lock_unavailable(self, error: BaseException) -> bool:
        return isinstance(error, errors.LockNotAvailable)  # 55P03: NOWAIT, lock_timeout

    def conflict(self, error: BaseException) -> bool:
        return isinstance(error, (errors.SerializationFailure, errors.DeadlockDetected))

    def fence_column_ddl(self, table: Table, column: str) -> str:
        query = sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS {} bigint").format(
            sql.Identifier(*table_parts(table)), sql.Identifier(column_name(column))
        )
        return query.as_string()


POSTGRESQL = PostgreSQL()
