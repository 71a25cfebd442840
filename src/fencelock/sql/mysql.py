"""The MySQL dialect (MySQL 8.0 and later, MariaDB 10.6 and later): every statement the
patterns run there, in one place.

Identifiers are quoted with backticks (a backtick in a name doubled) and then have their
``%`` doubled too: PyMySQL and aiomysql fill ``%(name)s`` parameters with Python's ``%``
operator, which would read a ``%`` in a name as the start of one. Values are always
parameters (``%(k0)s`` for the key, ``%(v0)s`` for the values, named by position).

Where MySQL differs from PostgreSQL:

- no ``UPDATE … RETURNING``: an optimistic update's row is read back after it wrote;
- an ``UPDATE``'s row count is the rows it *changed* (PyMySQL's default, without
  ``CLIENT.FOUND_ROWS``), so a fenced write that matched but had nothing to change
  counts 0, and ``INSERT … ON DUPLICATE KEY UPDATE`` counts 1 for an insert, 2 for an
  update, 0 for a row left as it was;
- a plain ``SELECT`` in a ``REPEATABLE READ`` transaction (the default) reads the
  transaction's snapshot while an ``UPDATE`` meets the latest committed row, so the fence
  a refused write met is read back with a locking read;
- the lock timeout is ``innodb_lock_wait_timeout``: whole seconds (at least 1) and the
  session's, so it is put back whether or not the lock was granted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pymysql.err import MySQLError

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

LOCK_WAIT_TIMEOUT = 1205
"""ER_LOCK_WAIT_TIMEOUT: ``innodb_lock_wait_timeout`` ran out; MariaDB's ``NOWAIT`` too."""
LOCK_NOWAIT = 3572
"""ER_LOCK_NOWAIT: MySQL 8's ``NOWAIT`` found the row locked."""
DEADLOCK = 1213
"""ER_LOCK_DEADLOCK: InnoDB rolled the whole transaction back to break a deadlock."""
RECORD_CHANGED = 1020
"""ER_CHECKREAD: the row changed since the transaction's snapshot (MariaDB's
``innodb_snapshot_isolation``), its serialization failure."""
MAX_LOCK_WAIT = 100_000_000
"""The largest ``innodb_lock_wait_timeout`` MariaDB takes, in seconds (MySQL takes more)."""


def quote(*parts: str) -> str:
    """A quoted, possibly qualified, identifier: ```shop`.`seats```."""
    return ".".join("`" + part.replace("`", "``") + "`" for part in parts)


def identifier(*parts: str) -> str:
    """A quoted identifier that is safe in a statement with parameters."""
    return quote(*parts).replace("%", "%%")


def _param(name: str) -> str:
    return f"%({name})s"


def _table(table: Table) -> str:
    return identifier(*table_parts(table))


def _columns(columns: Sequence[str]) -> str:
    return ", ".join(identifier(column_name(column)) for column in columns)


def _where(key: Mapping[str, Any], params: dict[str, Any]) -> str:
    """``key`` as ```col` = %(k0)s AND …`` (``IS NULL`` for a None), its values into
    ``params``."""
    tests: list[str] = []
    for number, (column, value) in enumerate(key_columns(key)):
        if value is None:
            tests.append(f"{identifier(column)} IS NULL")
        else:
            params[f"k{number}"] = value
            tests.append(f"{identifier(column)} = {_param(f'k{number}')}")
    return " AND ".join(tests)


def _assignments(values: Mapping[str, Any], params: dict[str, Any]) -> list[str]:
    """```col` = %(v0)s`` for each of ``values``, their values into ``params``."""
    sets: list[str] = []
    for number, (column, value) in enumerate(values.items()):
        params[f"v{number}"] = value
        sets.append(f"{identifier(column_name(column))} = {_param(f'v{number}')}")
    return sets


def _fence_test(fence: str, allow_equal: bool) -> str:
    below = "<=" if allow_equal else "<"
    return f"({fence} IS NULL OR {fence} {below} {_param('token')})"


def error_code(error: BaseException) -> int | None:
    """The server's error number in a PyMySQL (or aiomysql) error, if there is one."""
    if isinstance(error, MySQLError) and error.args and isinstance(error.args[0], int):
        return error.args[0]
    return None


class MySQL:
    """The statements of MySQL and MariaDB (InnoDB), as text with ``%(name)s``
    parameters."""

    returning = False
    session_lock_timeout = True
    unchanged_rows_counted = False

    def select(
        self,
        table: Table,
        key: Mapping[str, Any],
        *,
        columns: Sequence[str] = (),
        lock: LockMode | None = None,
    ) -> Statement:
        params: dict[str, Any] = {}
        listed = _columns(columns) if columns else "*"
        where = _where(key, params)
        query = f"SELECT {listed} FROM {_table(table)} WHERE {where} LIMIT 1"
        return Statement(query + (_LOCKS[lock] if lock else ""), params)

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
        sets = [*_assignments(changes, params), f"{version} = COALESCE({version}, 0) + 1"]
        if expected is None:
            same = f"{version} IS NULL"
        else:
            params["expected"] = expected
            same = f"{version} = {_param('expected')}"
        where = _where(key, params)
        query = f"UPDATE {_table(table)} SET {', '.join(sets)} WHERE {where} AND {same}"
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
        sets = [*_assignments(values, params), f"{fence} = {_param('token')}"]
        where = _where(key, params)
        newer = _fence_test(fence, allow_equal)
        query = f"UPDATE {_table(table)} SET {', '.join(sets)} WHERE {where} AND {newer}"
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
        """``INSERT … ON DUPLICATE KEY UPDATE c = IF(newer, %(v0)s, c), …, fence =
        IF(newer, %(token)s, fence)``: each column keeps its value unless the token is
        newer. The fence is assigned last, since MySQL assigns left to right and each
        ``IF`` after it would meet the new fence. The new values are the parameters
        again rather than ``VALUES(c)``, which MySQL 8.0.20 deprecated (its replacement,
        a row alias, MariaDB does not have)."""
        pairs = key_columns(key)
        params: dict[str, Any] = {"token": token}
        params.update({f"k{n}": value for n, (_, value) in enumerate(pairs)})
        params.update({f"v{n}": value for n, value in enumerate(values.values())})
        fence_name = column_name(fence_column, "fence column")
        fence = identifier(fence_name)
        inserted = [*(column for column, _ in pairs), *values, fence_name]
        placeholders = [
            *(_param(f"k{n}") for n in range(len(pairs))),
            *(_param(f"v{n}") for n in range(len(values))),
            _param("token"),
        ]
        newer = _fence_test(fence, allow_equal)
        new_values = [(identifier(column_name(c)), f"v{n}") for n, c in enumerate(values)]
        sets = [f"{c} = IF({newer}, {_param(p)}, {c})" for c, p in new_values]
        sets.append(f"{fence} = IF({newer}, {_param('token')}, {fence})")  # last
        query = (
            f"INSERT INTO {_table(table)} ({_columns(inserted)})"
            f" VALUES ({', '.join(placeholders)})"
            f" ON DUPLICATE KEY UPDATE {', '.join(sets)}"
        )
        return Statement(query, params)

    def read_fence(self, table: Table, key: Mapping[str, Any], fence_column: str) -> Statement:
        # a locking read: the latest committed row, as the UPDATE met it, where a plain
        # one would read the snapshot of a REPEATABLE READ transaction
        return self.select(table, key, columns=(fence_column,), lock="wait")

    def lock_timeout_setting(self) -> Statement:
        return Statement("SELECT @@SESSION.innodb_lock_wait_timeout AS setting")

    def set_lock_timeout(self, seconds: float) -> Statement:
        # whole seconds, and 0 is not taken: at least 1
        return self.restore_lock_timeout(min(MAX_LOCK_WAIT, max(1, math.ceil(seconds))))

    def restore_lock_timeout(self, setting: object) -> Statement:
        query = f"SET SESSION innodb_lock_wait_timeout = {_param('setting')}"
        return Statement(query, {"setting": setting})

    def lock_unavailable(self, error: BaseException) -> bool:
        return error_code(error) in (LOCK_WAIT_TIMEOUT, LOCK_NOWAIT)

    def conflict(self, error: BaseException) -> bool:
        return error_code(error) in (DEADLOCK, RECORD_CHANGED)

    def fence_column_ddl(self, table: Table, column: str) -> str:
        # no IF NOT EXISTS: MariaDB has it, MySQL does not
        name = quote(*table_parts(table))
        return f"ALTER TABLE {name} ADD COLUMN {quote(column_name(column))} BIGINT NULL"


MYSQL = MySQL()
