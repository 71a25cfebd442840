"""What a database dialect provides to the patterns: every statement they run, and
which of its driver's errors mean what.

The patterns (:mod:`.optimistic`, :mod:`.pessimistic`, :mod:`.fenced`) hold no SQL;
:mod:`.postgresql` is the one implementation so far. A MySQL one (``FOR UPDATE
NOWAIT``/``SKIP LOCKED`` exist since 8.0; ``innodb_lock_wait_timeout`` in whole seconds;
``INSERT … ON DUPLICATE KEY UPDATE`` with the fence compared column by column) is one
more class with these methods, and a branch in :func:`fencelock.sql.connections.bind`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from fencelock.sql.statement import LockMode, Statement, Table


class Dialect(Protocol):
    """The statements of one database; every identifier quoted, every value a parameter."""

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
        ...

    def versioned_update(
        self,
        table: Table,
        key: Mapping[str, Any],
        changes: Mapping[str, Any],
        version_column: str,
        expected: object,
    ) -> Statement:
        """Set ``changes`` and bump the version, only if it is still ``expected``;
        returns the updated row (no row: the version had moved)."""
        ...

    def fenced_update(
        self,
        table: Table,
        key: Mapping[str, Any],
        values: Mapping[str, Any],
        fence_column: str,
        token: int,
        allow_equal: bool,
    ) -> Statement:
        """Set ``values`` and the fence to ``token``, only if the fence is NULL or below
        ``token`` (or equal, with ``allow_equal``); its row count says which."""
        ...

    def fenced_upsert(
        self,
        table: Table,
        key: Mapping[str, Any],
        values: Mapping[str, Any],
        fence_column: str,
        token: int,
        allow_equal: bool,
    ) -> Statement:
        """As :meth:`fenced_update`, inserting the row if there is none."""
        ...

    def lock_timeout_setting(self) -> Statement:
        """One row, one column ``setting``: the row-lock wait timeout now in force."""
        ...

    def set_lock_timeout(self, seconds: float) -> Statement:
        """Row locks wait at most ``seconds``, until the end of the transaction."""
        ...

    def restore_lock_timeout(self, setting: object) -> Statement:
        """Put back a ``setting`` read by :meth:`lock_timeout_setting`."""
        ...

    def lock_unavailable(self, error: BaseException) -> bool:
        """Whether ``error`` says a row lock was not granted (held elsewhere: NOWAIT,
        or the lock timeout ran out)."""
        ...

    def conflict(self, error: BaseException) -> bool:
        """Whether ``error`` is a write conflict that a new attempt may not meet
        (a serialization failure, a deadlock)."""
        ...

    def fence_column_ddl(self, table: Table, column: str) -> str:
        """The statement that adds the fence column (a nullable big integer)."""
        ...
