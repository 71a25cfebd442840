"""What a database dialect provides to the patterns: every statement they run, which of
its driver's errors mean what, and the few ways its databases behave differently.

The patterns (:mod:`.optimistic`, :mod:`.pessimistic`, :mod:`.fenced`) hold no SQL; the
dialects are :mod:`.postgresql` and :mod:`.mysql`, and
:func:`fencelock.sql.connections.bind` picks one for a connection.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from fencelock.sql.statement import LockMode, Statement, Table


class Dialect(Protocol):
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
        """Set ``changes`` and bump the version, only if it is still ``expected``; with
        :attr:`returning`, returns the updated row (no row: the version had moved),
        otherwise its row count says whether it wrote."""
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
        """As :meth:`fenced_update`, inserting the row if there is none (its row count
        is 1 for a row inserted or updated; MySQL counts an update as 2)."""
        ...

    def read_fence(self, table: Table, key: Mapping[str, Any], fence_column: str) -> Statement:
        """The fence of the row at ``key`` as a fenced write just met it (the latest
        committed value, not an older snapshot of the transaction's)."""
        ...

    def lock_timeout_setting(self) -> Statement:
        """One row, one column ``setting``: the row-lock wait timeout now in force."""
        ...

    def set_lock_timeout(self, seconds: float) -> Statement:
        """Row locks wait at most ``seconds``, until :meth:`restore_lock_timeout` (or
        the end of the transaction, unless :attr:`session_lock_timeout`)."""
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
        """The statement that adds the fence column (a nullable big integer), to be run
        without parameters."""
        ...
