"""The fence check and the fenced update on Django's connections, and this process's
client for ``settings.FENCELOCK_URL``. Imports no model: usable before the app registry
is ready."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any

try:
    from django.conf import settings
    from django.db import DEFAULT_DB_ALIAS, connections, transaction
    from django.db.backends.base.base import BaseDatabaseWrapper
except ImportError as missing:  # a plain install
    raise ImportError(
        "fencelock.integrations.django needs Django: pip install 'fencelock[django]'"
    ) from missing

import fencelock
from fencelock.errors import ConfigError
from fencelock.sql.dialect import Dialect
from fencelock.sql.fenced import fence_check, fenced_flow
from fencelock.sql.flow import run
from fencelock.sql.statement import FencedWrite, Row, Statement


def fence(key: str, token: int, *, using: str | None = None, allow_equal: bool = False) -> None:
    """Check ``token`` against the newest one accepted for ``key`` and record it, in one
    statement inside the current ``transaction.atomic()`` block of the database ``using``
    (default: ``"default"``).

    Raises :class:`~fencelock.StaleToken` if ``token`` is not newer (``allow_equal=True``
    accepts the same token again: one lease writing twice); raised inside the atomic
    block, it rolls back everything the block wrote. :class:`~fencelock.ConfigError`
    outside an atomic block (the check would commit before the writes it protects).
    """
    connection = _in_atomic_block(using)
    check = fence_check(key, token, allow_equal=allow_equal)
    run(fenced_flow(_dialect(connection), check, name=key), _Cursor(connection))


def fenced_update(
    model: type[Any],
    where: Mapping[str, Any],
    values: Mapping[str, Any],
    token: int,
    *,
    fence_field: str = "fence_token",
    using: str | None = None,
    allow_equal: bool = False,
) -> None:
    """Set ``values`` on the one row of ``model`` that ``where`` selects and its
    ``fence_field`` to ``token``, only if that field is NULL or below ``token``, in one
    ``UPDATE``::

        UPDATE shop_seat SET buyer = %(v0)s, fence_token = %(token)s
        WHERE seat = %(k0)s AND (fence_token IS NULL OR fence_token < %(token)s)

    ``where`` (a unique key) and ``values`` map the model's field names to values.
    Raises :class:`~fencelock.StaleToken` (``.last``: the row's fence) if the token is
    not newer, :class:`~fencelock.RowNotFound` if no row matches ``where``. Runs in the
    current atomic block if there is one (a savepoint), else in a transaction of its own.
    """
    connection = _connection(using)
    write = FencedWrite(
        _meta(model).db_table,
        _columns(model, where, connection),
        token,
        _columns(model, values, connection),
        _field(model, fence_field).column,
        False,
        allow_equal,
    )
    with transaction.atomic(using=connection.alias):
        run(fenced_flow(_dialect(connection), write), _Cursor(connection))


_client_lock = threading.Lock()
_clients: dict[int, fencelock.Client] = {}


def locks() -> fencelock.Client:
    """This process's fencelock client for ``settings.FENCELOCK_URL`` (fencelock's
    default URL when it is unset or None), made on first use and kept."""
    pid = os.getpid()
    with _client_lock:
        client = _clients.get(pid)
        if client is None:
            client = _clients[pid] = fencelock.connect(getattr(settings, "FENCELOCK_URL", None))
        return client


# --- what they share ---------------------------------------------------------------------


def _connection(using: str | None) -> BaseDatabaseWrapper:
    alias = using or DEFAULT_DB_ALIAS
    if alias not in connections:
        raise ConfigError(f"no database {alias!r} in settings.DATABASES")
    return connections[alias]


def _meta(model: object) -> Any:
    meta = getattr(model, "_meta", None)
    if not isinstance(model, type) or meta is None or not hasattr(meta, "db_table"):
        raise ConfigError(f"fenced_update needs a Django model class, not {model!r}")
    return meta


def _field(model: type[Any], name: str) -> Any:
    from django.core.exceptions import FieldDoesNotExist

    try:
        return _meta(model).get_field(name)
    except FieldDoesNotExist:
        raise ConfigError(f"{model.__name__} has no field {name!r}") from None


def _in_atomic_block(using: str | None) -> BaseDatabaseWrapper:
    connection = _connection(using)
    if not connection.in_atomic_block:
        raise ConfigError(
            "fence the write inside its transaction: call fence() in the "
            f"transaction.atomic(using={connection.alias!r}) block that writes, or it "
            "commits the check before the write"
        )
    return connection


def _dialect(connection: BaseDatabaseWrapper) -> Dialect:
    """fencelock.sql's statements for the connection's database."""
    vendor = connection.vendor
    if vendor == "postgresql":
        from fencelock.sql.postgresql import PLAIN_POSTGRESQL

        return PLAIN_POSTGRESQL
    if vendor == "mysql":  # Django opens MySQL connections with FOUND_ROWS
        from fencelock.sql.mysql import FOUND_ROWS_MYSQL

        return FOUND_ROWS_MYSQL
    if vendor == "sqlite":
        from fencelock.sql.sqlite import SQLITE

        return SQLITE
    raise ConfigError(
        "fencelock.integrations.django fences PostgreSQL, MySQL, MariaDB and SQLite,"
        f" not {vendor!r}"
    )


def _columns(
    model: type[Any], fields: Mapping[str, Any], connection: BaseDatabaseWrapper
) -> dict[str, Any]:
    """Field names and values as column names and the values the database stores."""
    columns = {}
    for name, value in fields.items():
        field = _field(model, name)
        columns[field.column] = field.get_db_prep_save(value, connection)
    return columns


class _Cursor:
    """A Django connection as fencelock.sql's flows talk to one: its cursors, in its
    current transaction."""

    def __init__(self, connection: BaseDatabaseWrapper) -> None:
        self.connection = connection

    def fetch(self, statement: Statement) -> list[Row]:
        with self.connection.cursor() as cursor:
            cursor.execute(_query(statement), statement.params)
            columns = [column[0] for column in cursor.description or ()]
            return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]

    def execute(self, statement: Statement) -> int:
        with self.connection.cursor() as cursor:
            cursor.execute(_query(statement), statement.params)
            return int(cursor.rowcount)

    def transaction(self) -> AbstractContextManager[object]:
        atomic: AbstractContextManager[object] = transaction.atomic(using=self.connection.alias)
        return atomic

    def in_transaction(self) -> bool:
        return bool(self.connection.in_atomic_block)


def _query(statement: Statement) -> str:
    if not isinstance(statement.query, str):
        raise TypeError(f"not a plain-text statement: {statement.query!r}")
    return statement.query
