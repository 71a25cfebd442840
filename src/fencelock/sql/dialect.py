"""What a database dialect provides to the patterns: every statement they run, which of
its driver's errors mean what, and the few ways its databases behave differently.

The patterns (:mod:`.optimistic`, :mod:`.pessimistic`, :mod:`.fenced`) hold no SQL. The
statements PostgreSQL and MySQL write alike are written here once, as text with
``%(name)s`` parameters, which both drivers take; each dialect (:mod:`.postgresql`,
:mod:`.mysql`) gives its quoting and writes what differs.
:func:`fencelock.sql.connections.bind` picks one for a connection.

Values are always parameters, named by position (``%(k0)s`` for the key, ``%(v0)s`` for
the values), so a column's name only ever reaches the SQL as a quoted identifier.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from fencelock.sql.statement import (
    FencedWrite,
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


# The target row of an upsert, in its DO UPDATE (beside the database's own ``excluded``).
_EXISTING = "existing"


def param(name: str) -> str:
    """The named parameter ``name``: ``%(name)s``."""
    return f"%({name})s"


class Dialect(ABC):
    """The statements of one database; every identifier quoted, every value a parameter."""

    returning: bool
    """Whether :meth:`versioned_update` returns the row it wrote (``RETURNING *``); if
    not (MySQL), its row count says whether it wrote, and the row is read back."""

    session_lock_timeout: bool
    """Whether :meth:`set_lock_timeout` changes the session's setting (MySQL), which must
    then be put back even when the lock is not granted; if not (PostgreSQL's ``SET
    LOCAL``), the setting ends with the transaction, which a lock not granted aborts."""

    unchanged_rows_counted: bool
    """Whether an ``UPDATE``'s row count includes the rows it matched but left as they
    were (PostgreSQL); MySQL counts only the rows it changed."""

    upsert_count_certain: bool = True
    """Whether a :meth:`fenced_upsert`'s row count alone tells a refused write from an
    accepted one. Not on a MySQL connection that counts rows matched
    (:class:`~fencelock.sql.mysql.FoundRowsMySQL`), where both count 1."""

    fence_read_lock: LockMode | None
    """How :meth:`read_fence` reads the row: with this lock, or (None) a plain read."""

    @abstractmethod
    def quote(self, *parts: str) -> str:
        """A quoted, possibly qualified, identifier, for a statement run without
        parameters."""

    def identifier(self, *parts: str) -> str:
        """A quoted identifier that is safe in a statement with parameters: its ``%``
        doubled, which the driver would read as the start of a parameter."""
        return self.quote(*parts).replace("%", "%%")

    def statement(self, query: str, params: dict[str, Any] | None = None) -> Statement:
        """``query`` and its parameters, as this dialect's driver runs them."""
        return Statement(query, params or {})

    def select(
        self,
        table: Table,
        key: Mapping[str, Any],
        *,
        columns: Sequence[str] = (),
        lock: LockMode | None = None,
    ) -> Statement:
        """At most one row matching ``key`` (a None value matches NULL): all columns
        or ``columns``; with ``lock``, ``FOR UPDATE`` (``NOWAIT``, ``SKIP LOCKED``)."""
        params: dict[str, Any] = {}
        listed = self._columns(columns) if columns else "*"
        where = self._where(key, params)
        query = f"SELECT {listed} FROM {self._table(table)} WHERE {where} LIMIT 1"  # noqa: S608 (quoted identifiers; values are parameters)
        return self.statement(query + (_LOCKS[lock] if lock else ""), params)

    def versioned_update(
        self,
        table: Table,
        key: Mapping[str, Any],
        changes: Mapping[str, Any],
        version_column: str,
        expected: object,
    ) -> Statement:
        """Set ``changes`` and bump the version, only if it is still ``expected``; with
        :attr:`returning`, returns the updated row (no row: the version had moved),
        otherwise its row count says whether it wrote."""
        params: dict[str, Any] = {}
        version = self.identifier(column_name(version_column, "version column"))
        sets = [*self._assignments(changes, params), f"{version} = COALESCE({version}, 0) + 1"]
        if expected is None:
            same = f"{version} IS NULL"
        else:
            params["expected"] = expected
            same = f"{version} = {param('expected')}"
        where = self._where(key, params)
        query = f"UPDATE {self._table(table)} SET {', '.join(sets)} WHERE {where} AND {same}"  # noqa: S608 (quoted identifiers; values are parameters)
        return self.statement(query + (" RETURNING *" if self.returning else ""), params)

    def fenced_update(self, write: FencedWrite) -> Statement:
        """Set the write's values and the fence to its token, only if the fence is NULL
        or below the token (or equal, with ``allow_equal``); its row count says which."""
        params: dict[str, Any] = {"token": write.token}
        fence = self.identifier(write.fence_column)
        sets = [*self._assignments(write.values, params), f"{fence} = {param('token')}"]
        where = self._where(write.key, params)
        newer = self._fence_test(fence, param("token"), write.allow_equal)
        query = f"UPDATE {self._table(write.table)} SET {', '.join(sets)} WHERE {where} AND {newer}"  # noqa: S608 (quoted identifiers; values are parameters)
        return self.statement(query, params)

    @abstractmethod
    def fenced_upsert(self, write: FencedWrite) -> Statement:
        """As :meth:`fenced_update`, inserting the row if there is none (its row count
        is 1 for a row inserted or updated; MySQL counts an update as 2)."""

    def on_conflict_upsert(self, write: FencedWrite) -> Statement:
        """``INSERT … AS existing … ON CONFLICT (key) DO UPDATE SET c = excluded.c, …
        WHERE newer``: the row keeps every column unless the token is newer. PostgreSQL's
        and SQLite's (3.24 and later) :meth:`fenced_upsert`."""
        params: dict[str, Any] = {}
        row = self._inserted_row(write, params)
        keys = self._columns([column for column, _ in key_columns(write.key)])
        updated = [*write.values, write.fence_column]
        sets = ", ".join(f"{c} = excluded.{c}" for c in map(self.identifier, updated))
        newer = self._fence_test(
            self.identifier(_EXISTING, write.fence_column),
            self.identifier("excluded", write.fence_column),
            write.allow_equal,
        )
        query = (
            f"INSERT INTO {self._table(write.table)} AS {self.identifier(_EXISTING)} {row}"
            f" ON CONFLICT ({keys}) DO UPDATE SET {sets} WHERE {newer}"
        )
        return self.statement(query, params)

    def read_fence(self, write: FencedWrite) -> Statement:
        """The fence of the write's row as the write just met it (the latest committed
        value, not an older snapshot of the transaction's)."""
        columns = (write.fence_column,)
        return self.select(write.table, write.key, columns=columns, lock=self.fence_read_lock)

    @abstractmethod
    def lock_timeout_setting(self) -> Statement:
        """One row, one column ``setting``: the row-lock wait timeout now in force."""

    @abstractmethod
    def set_lock_timeout(self, seconds: float) -> Statement:
        """Row locks wait at most ``seconds``, until :meth:`restore_lock_timeout` (or
        the end of the transaction, unless :attr:`session_lock_timeout`)."""

    @abstractmethod
    def restore_lock_timeout(self, setting: object) -> Statement:
        """Put back a ``setting`` read by :meth:`lock_timeout_setting`."""

    @abstractmethod
    def lock_unavailable(self, error: BaseException) -> bool:
        """Whether ``error`` says a row lock was not granted (held elsewhere: NOWAIT,
        or the lock timeout ran out)."""

    @abstractmethod
    def conflict(self, error: BaseException) -> bool:
        """Whether ``error`` is a write conflict that a new attempt may not meet
        (a serialization failure, a deadlock)."""

    @abstractmethod
    def fence_column_ddl(self, table: Table, column: str) -> str:
        """The statement that adds the fence column (a nullable big integer), to be run
        without parameters."""

    # The pieces of a statement, for the dialects' own statements too.

    def _table(self, table: Table) -> str:
        return self.identifier(*table_parts(table))

    def _columns(self, columns: Sequence[str]) -> str:
        return ", ".join(self.identifier(column_name(column)) for column in columns)

    def _where(self, key: Mapping[str, Any], params: dict[str, Any]) -> str:
        """``key`` as ``col = %(k0)s AND …`` (``IS NULL`` for a None), its values into
        ``params``."""
        tests: list[str] = []
        for number, (column, value) in enumerate(key_columns(key)):
            if value is None:
                tests.append(f"{self.identifier(column)} IS NULL")
            else:
                params[f"k{number}"] = value
                tests.append(f"{self.identifier(column)} = {param(f'k{number}')}")
        return " AND ".join(tests)

    def _assignments(self, values: Mapping[str, Any], params: dict[str, Any]) -> list[str]:
        """``col = %(v0)s`` for each of ``values``, their values into ``params``."""
        sets: list[str] = []
        for number, (column, value) in enumerate(values.items()):
            params[f"v{number}"] = value
            sets.append(f"{self.identifier(column_name(column))} = {param(f'v{number}')}")
        return sets

    def _fence_test(self, fence: str, token: str, allow_equal: bool) -> str:
        """Whether ``token`` is newer than ``fence`` (or as new, with ``allow_equal``)."""
        below = "<=" if allow_equal else "<"
        return f"({fence} IS NULL OR {fence} {below} {token})"

    def _inserted_row(self, write: FencedWrite, params: dict[str, Any]) -> str:
        """``(key columns, value columns, fence) VALUES (%(k0)s, …, %(v0)s, …,
        %(token)s)``: the row an upsert inserts, its values into ``params``."""
        keys = key_columns(write.key)
        params["token"] = write.token
        params.update({f"k{n}": value for n, (_, value) in enumerate(keys)})
        params.update({f"v{n}": value for n, value in enumerate(write.values.values())})
        columns = [*(column for column, _ in keys), *write.values, write.fence_column]
        placeholders = [
            *(param(f"k{n}") for n in range(len(keys))),
            *(param(f"v{n}") for n in range(len(write.values))),
            param("token"),
        ]
        return f"({self._columns(columns)}) VALUES ({', '.join(placeholders)})"
