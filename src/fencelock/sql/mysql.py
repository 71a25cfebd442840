"""The MySQL dialect (MySQL 8.0 and later, MariaDB 10.6 and later): every statement the
patterns run there, in one place.

Identifiers are quoted with backticks (a backtick in a name doubled) and then have their
``%`` doubled too: PyMySQL and aiomysql fill ``%(name)s`` parameters with Python's ``%``
operator, which would read a ``%`` in a name as the start of one. The statements MySQL
writes as PostgreSQL does are :class:`~fencelock.sql.dialect.Dialect`'s.

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
from typing import Any

from fencelock.sql.dialect import Dialect, param
from fencelock.sql.statement import FencedWrite, Statement, Table, column_name, table_parts

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


def error_code(error: BaseException) -> int | None:
    """The server's error number in a PyMySQL (or aiomysql) error, if there is one."""
    from pymysql.err import MySQLError

    if isinstance(error, MySQLError) and error.args and isinstance(error.args[0], int):
        return error.args[0]
    return None


class MySQL(Dialect):
    """The statements of MySQL and MariaDB (InnoDB), as text with ``%(name)s``
    parameters."""

    returning = False
    session_lock_timeout = True
    unchanged_rows_counted = False
    # a locking read: the latest committed row, as the UPDATE met it, where a plain one
    # would read the snapshot of a REPEATABLE READ transaction
    fence_read_lock = "wait"

    def quote(self, *parts: str) -> str:
        """A quoted, possibly qualified, identifier: ```shop`.`seats```."""
        return ".".join("`" + part.replace("`", "``") + "`" for part in parts)

    def fenced_upsert(self, write: FencedWrite) -> Statement:
        """``INSERT … ON DUPLICATE KEY UPDATE c = IF(newer, %(v0)s, c), …, fence =
        IF(newer, %(token)s, fence)``: each column keeps its value unless the token is
        newer. The fence is assigned last, since MySQL assigns left to right and each
        ``IF`` after it would meet the new fence. The new values are the parameters
        again rather than ``VALUES(c)``, which MySQL 8.0.20 deprecated (its replacement,
        a row alias, MariaDB does not have)."""
        params: dict[str, Any] = {}
        row = self._inserted_row(write, params)
        fence = self.identifier(write.fence_column)
        newer = self._fence_test(fence, param("token"), write.allow_equal)
        columns = [self.identifier(column) for column in write.values]
        sets = [f"{c} = IF({newer}, {param(f'v{n}')}, {c})" for n, c in enumerate(columns)]
        sets.append(f"{fence} = IF({newer}, {param('token')}, {fence})")  # last
        query = (
            f"INSERT INTO {self._table(write.table)} {row}"
            f" ON DUPLICATE KEY UPDATE {', '.join(sets)}"
        )
        return self.statement(query, params)

    def lock_timeout_setting(self) -> Statement:
        return self.statement("SELECT @@SESSION.innodb_lock_wait_timeout AS setting")

    def set_lock_timeout(self, seconds: float) -> Statement:
        # whole seconds, and 0 is not taken: at least 1
        return self.restore_lock_timeout(min(MAX_LOCK_WAIT, max(1, math.ceil(seconds))))

    def restore_lock_timeout(self, setting: object) -> Statement:
        query = f"SET SESSION innodb_lock_wait_timeout = {param('setting')}"
        return self.statement(query, {"setting": setting})

    def lock_unavailable(self, error: BaseException) -> bool:
        return error_code(error) in (LOCK_WAIT_TIMEOUT, LOCK_NOWAIT)

    def conflict(self, error: BaseException) -> bool:
        return error_code(error) in (DEADLOCK, RECORD_CHANGED)

    def fence_column_ddl(self, table: Table, column: str) -> str:
        # no IF NOT EXISTS: MariaDB has it, MySQL does not
        name = self.quote(*table_parts(table))
        return f"ALTER TABLE {name} ADD COLUMN {self.quote(column_name(column))} BIGINT NULL"


class FoundRowsMySQL(MySQL):
    """MySQL on a connection that counts the rows an ``UPDATE`` *matched*
    (``CLIENT.FOUND_ROWS``), as SQLAlchemy opens every MySQL connection: a fenced
    ``UPDATE`` counts 1 when the fence let it through, whether or not it changed
    anything, but a refused upsert counts 1 too, as an insert does. So the fenced flow
    reads the fence before the upsert (without a lock) and after it (with one)
    (:attr:`~fencelock.sql.dialect.Dialect.upsert_count_certain`)."""

    unchanged_rows_counted = True
    upsert_count_certain = False


MYSQL = MySQL()
FOUND_ROWS_MYSQL = FoundRowsMySQL()
