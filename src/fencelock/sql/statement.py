"""What every dialect builds on: a statement and its parameters, the checks on the
table, key and values a caller passes, and a fenced write as one checked value (pure;
no SQL text, no driver).

Parameters are always named by position (``k0``, ``v0``, ...), never by column, so a
column's name only ever reaches the SQL as a quoted identifier.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from fencelock.errors import ConfigError

Table = str | tuple[str, ...]
"""A table: ``"seats"``, or ``("shop", "seats")`` for a schema-qualified one."""
Row = dict[str, Any]
"""A row: column name to value."""
LockMode = Literal["wait", "nowait", "skip_locked"]
LOCK_MODES: tuple[LockMode, ...] = ("wait", "nowait", "skip_locked")


@dataclass(frozen=True)
class Statement:
    """One statement: the dialect's query object (opaque to the flows) and its
    named parameters (always a dict, so ``%`` is always escaped the same way)."""

    query: object
    params: dict[str, Any] = field(default_factory=dict)


def table_parts(table: Table) -> tuple[str, ...]:
    """``table`` as its name's parts, or ConfigError."""
    parts = (table,) if isinstance(table, str) else tuple(table)
    if not parts or len(parts) > 2:
        raise ConfigError(f"a table is a name or (schema, name), not {table!r}")
    for part in parts:
        column_name(part, "table name")
    return parts


def column_name(name: object, what: str = "column name") -> str:
    """``name`` if it can be a quoted identifier, or ConfigError."""
    if not isinstance(name, str) or not name or "\x00" in name:
        raise ConfigError(f"a {what} must be a non-empty string without NUL, not {name!r}")
    return name


def key_columns(key: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The key's (column, value) pairs, in order; ConfigError if there are none."""
    if not isinstance(key, Mapping) or not key:
        raise ConfigError(f"a key is a non-empty dict of column to value, not {key!r}")
    return [(column_name(column), value) for column, value in key.items()]


def value_columns(values: Mapping[str, Any], *, reserved: tuple[str, ...] = ()) -> list[str]:
    """The columns ``values`` sets; ConfigError if one is a column this helper sets itself."""
    if not isinstance(values, Mapping):
        raise ConfigError(f"values must be a dict of column to value, not {values!r}")
    for column in values:
        if column_name(column) in reserved:
            raise ConfigError(f"column {column!r} is set by fencelock.sql: leave it out of values")
    return list(values)


def table_name(table: Table) -> str:
    """``shop.seats``: a table as people write it, for a message or a metric."""
    return table if isinstance(table, str) else ".".join(table)


def describe(table: Table, key: Mapping[str, Any]) -> str:
    """``shop.seats(seat='A1')``: a row for an error message."""
    pairs = ", ".join(f"{column}={value!r}" for column, value in key.items())
    return f"{table_name(table)}({pairs})"


@dataclass(frozen=True)
class FencedWrite:
    """Set ``values`` on the row at ``key`` and its fence to ``token``, only if the fence
    is NULL or below ``token`` (or equal, with ``allow_equal``); with ``upsert``, insert
    the row if there is none. Checked when made: ConfigError if an argument is wrong."""

    table: Table
    key: Mapping[str, Any]
    token: int
    values: Mapping[str, Any]
    fence_column: str
    upsert: bool
    allow_equal: bool

    def __post_init__(self) -> None:
        if isinstance(self.token, bool) or not isinstance(self.token, int):
            raise ConfigError(f"a fencing token is an int (lease.token), not {self.token!r}")
        fence = column_name(self.fence_column, "fence column")
        keys = key_columns(self.key)
        reserved = (fence, *(column for column, _ in keys)) if self.upsert else (fence,)
        value_columns(self.values, reserved=reserved)
        if self.upsert and any(value is None for _, value in keys):
            raise ConfigError(f"an upsert's key cannot be NULL: {self.row}")

    @property
    def row(self) -> str:
        """The row, for an error message: ``shop.seats(seat='A1')``."""
        return describe(self.table, self.key)
