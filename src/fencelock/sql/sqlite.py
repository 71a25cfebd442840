"""The SQLite dialect (3.24 and later, for its upsert): the fence statements that
:func:`fencelock.fencing.sqlite_fence` and the SQLAlchemy integration run there.

Statements are written as the other dialects write them (``%(name)s`` parameters, ``%``
doubled in a quoted name) and turned into SQLite's named parameters (``:name``) by the
session that runs them (:class:`SQLite3Session`; SQLAlchemy's ``text()`` takes the same
form). Only the fenced
statements are SQLite's: the row-lock and lock-timeout statements of the other dialects
have no SQLite form (a transaction takes the whole database, ``BEGIN IMMEDIATE``).
"""

from __future__ import annotations

import itertools
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from fencelock.errors import ConfigError
from fencelock.sql.dialect import Dialect
from fencelock.sql.statement import FencedWrite, Row, Statement, Table, column_name, table_parts

_SAVEPOINTS = itertools.count(1)
_PYFORMAT = re.compile(r"%%|%\((\w+)\)s")


def named(query: str, colon: str = ":") -> str:
    """``query`` with its ``%(name)s`` parameters as ``:name`` and its ``%%`` as ``%``;
    every other ``:`` (in a quoted name) written as ``colon``."""
    query = query.replace(":", "\x00")  # no NUL in a name (statement.column_name)

    def one(match: re.Match[str]) -> str:
        return "%" if match.group(1) is None else f":{match.group(1)}"

    return _PYFORMAT.sub(one, query).replace("\x00", colon)


class SQLite(Dialect):
    """The fence statements of SQLite, as text with ``%(name)s`` parameters."""

    returning = False
    session_lock_timeout = False
    unchanged_rows_counted = True  # changes() counts every row an UPDATE matched
    fence_read_lock = None  # a transaction sees the whole database as it wrote it

    def quote(self, *parts: str) -> str:
        return ".".join('"' + part.replace('"', '""') + '"' for part in parts)

    def fenced_upsert(self, write: FencedWrite) -> Statement:
        """``INSERT … ON CONFLICT (key) DO UPDATE … WHERE newer``, as on PostgreSQL."""
        return self.on_conflict_upsert(write)

    def lock_timeout_setting(self) -> Statement:
        raise ConfigError("SQLite has no row locks: fencelock.sql's for_update needs a server")

    def set_lock_timeout(self, seconds: float) -> Statement:
        return self.lock_timeout_setting()

    def restore_lock_timeout(self, setting: object) -> Statement:
        return self.lock_timeout_setting()

    def lock_unavailable(self, error: BaseException) -> bool:
        return False

    def conflict(self, error: BaseException) -> bool:
        return False

    def fence_column_ddl(self, table: Table, column: str) -> str:
        name = self.quote(*table_parts(table))
        return f"ALTER TABLE {name} ADD COLUMN {self.quote(column_name(column))} INTEGER"


SQLITE = SQLite()


class SQLite3Session:
    """A standard-library ``sqlite3.Connection``, as the flows talk to it: rows as dicts
    whatever its own row factory, in the caller's transaction."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def fetch(self, statement: Statement) -> list[Row]:
        cursor = self.conn.execute(_text(statement), statement.params)
        columns = [column[0] for column in cursor.description or ()]
        return [dict(zip(columns, values, strict=True)) for values in cursor.fetchall()]

    def execute(self, statement: Statement) -> int:
        return self.conn.execute(_text(statement), statement.params).rowcount

    @contextmanager
    def transaction(self) -> Iterator[None]:
        name = f"fencelock_{next(_SAVEPOINTS)}"
        self.conn.execute(f"SAVEPOINT {name}")
        try:
            yield
        except BaseException:
            self.conn.execute(f"ROLLBACK TO {name}")
            self.conn.execute(f"RELEASE {name}")
            raise
        self.conn.execute(f"RELEASE {name}")

    def in_transaction(self) -> bool:
        return self.conn.in_transaction


def _text(statement: Statement) -> str:
    if not isinstance(statement.query, str):
        raise TypeError(f"not an SQLite statement: {statement.query!r}")
    return named(statement.query)
