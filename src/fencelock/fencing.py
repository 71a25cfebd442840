"""Fencing guards: the resource side of a fencing token.

A guard accepts a write for ``key`` only when its token is greater than the
last token accepted for that key, atomically, and raises :class:`StaleToken`
(counting the rejection) otherwise. A paused process that wakes up holding a
lost lease carries an old token, so its late write is refused.

Put the check in the same transaction as the write it protects::

    with sqlite3.connect("shop.db", isolation_level=None) as db:
        db.execute("BEGIN IMMEDIATE")
        fencing.sqlite_fence(db, "show/42", lease.token)   # raises StaleToken
        db.execute("UPDATE seats SET buyer = ? WHERE seat = ?", (buyer, seat))
        db.execute("COMMIT")
"""

from __future__ import annotations

import sqlite3
import threading
from typing import Protocol

from fencelock.errors import BackendUnavailable, StaleToken
from fencelock.metrics import REGISTRY

__all__ = [
    "FencingGuard",
    "MemoryGuard",
    "RedisGuard",
    "SQLiteGuard",
    "StaleToken",
    "sqlite_fence",
]


class FencingGuard(Protocol):
    """What a resource keeps to refuse a stale holder's writes: per key, the newest
    token accepted; an older one raises :class:`StaleToken`."""

    def accept(self, key: str, token: int, *, allow_equal: bool = False) -> None:
        """Record ``token`` for ``key``, or raise StaleToken if it is not newer.

        ``allow_equal=True`` also accepts the last accepted token again, so one
        lease may write the same key several times (two leases never share a token).
        A write made after this call, separately, is check-then-act: a pause between
        the two lets a newer holder in. Fence the write itself (:func:`sqlite_fence`
        in its transaction, :meth:`RedisGuard.write`) unless the resource runs both
        as one step.
        """

    def last(self, key: str) -> int | None:
        """The last token accepted for ``key``."""


class _Rejections:
    rejections: int = 0

    def _reject(self, key: str, token: int, last: int) -> StaleToken:
        self.rejections += 1
        REGISTRY.rejected(key)
        return StaleToken(key, token, last)


class MemoryGuard(_Rejections):
    """A guard for a resource in this process's memory."""

    def __init__(self) -> None:
        self._last: dict[str, int] = {}
        self._guard = threading.Lock()

    def accept(self, key: str, token: int, *, allow_equal: bool = False) -> None:
        """As :meth:`FencingGuard.accept`."""
        with self._guard:
            last = self._last.get(key)
            if last is not None and (token < last or (token == last and not allow_equal)):
                raise self._reject(key, token, last)
            self._last[key] = token

    def last(self, key: str) -> int | None:
        """The last token accepted for ``key``."""
        with self._guard:
            return self._last.get(key)


_CREATE = """CREATE TABLE IF NOT EXISTS fencelock_fences (
    key TEXT PRIMARY KEY, token INTEGER NOT NULL) WITHOUT ROWID"""


def install_sqlite_fences(conn: sqlite3.Connection) -> None:
    """Create the table the SQLite guard keeps its last tokens in."""
    conn.execute(_CREATE)


def sqlite_fence(
    conn: sqlite3.Connection, key: str, token: int, *, allow_equal: bool = False
) -> None:
    """Check-and-advance the fence for ``key`` inside the caller's open transaction.

    Raises StaleToken if ``token`` is not greater than the last accepted one
    (or equal, with ``allow_equal``); roll the transaction back then, so the
    protected write never lands.

    The check is :mod:`fencelock.sql`'s for the fence table
    (:func:`fencelock.sql.fenced.fence_check`), the one the SQLAlchemy integration runs.
    """
    from fencelock.sql.fenced import fence_check, fenced_flow
    from fencelock.sql.flow import run
    from fencelock.sql.sqlite import SQLITE, SQLite3Session

    check = fence_check(key, token, allow_equal=allow_equal)
    try:
        run(fenced_flow(SQLITE, check, name=key), SQLite3Session(conn))
    except StaleToken:
        _SHARED_COUNT.rejections += 1  # REGISTRY counted it, by the key
        raise


_SHARED_COUNT = _Rejections()


class SQLiteGuard(_Rejections):
    """A guard whose last tokens live in an SQLite file (shared by processes)."""

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            self._conn = sqlite3.connect(
                path, timeout=10, isolation_level=None, check_same_thread=False
            )
            self._conn.execute("PRAGMA journal_mode=WAL")
            install_sqlite_fences(self._conn)
        except sqlite3.Error as exc:
            raise BackendUnavailable(f"cannot open fencing database {path!r}: {exc}") from exc
        self._guard = threading.Lock()

    def accept(self, key: str, token: int, *, allow_equal: bool = False) -> None:
        """As :meth:`FencingGuard.accept`, in a transaction of its own."""
        with self._guard:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                sqlite_fence(self._conn, key, token, allow_equal=allow_equal)
            except StaleToken as exc:
                self._conn.execute("ROLLBACK")
                self.rejections += 1
                raise exc from None
            self._conn.execute("COMMIT")

    def last(self, key: str) -> int | None:
        """The last token accepted for ``key``."""
        with self._guard:
            row = self._conn.execute(
                "SELECT token FROM fencelock_fences WHERE key = ?", (key,)
            ).fetchone()
        return None if row is None else int(row[0])

    def close(self) -> None:
        """Close the guard's database connection."""
        self._conn.close()


class RedisGuard(_Rejections):
    """A guard for data kept in Redis: check-and-set by token in one Lua script.

    ``write(key, token, data_key, value)`` sets ``data_key`` only if ``token``
    passes the fence for ``key``, in the same script, so a stale holder can
    never overwrite a newer holder's value.
    """

    def __init__(self, url: str) -> None:
        from fencelock.backends import open_redis_fence

        self._fence = open_redis_fence(url)

    @staticmethod
    def fence_key(key: str) -> str:
        """The Redis key that keeps ``key``'s last token (hash-tagged with ``key``)."""
        return f"fencelock-fence:{{{key}}}"

    def accept(self, key: str, token: int, *, allow_equal: bool = False) -> None:
        """As :meth:`FencingGuard.accept`, in one Lua script on the server."""
        self._run(key, token, allow_equal, [])

    def write(
        self, key: str, token: int, data_key: str, value: str, *, allow_equal: bool = False
    ) -> None:
        """Set ``data_key`` to ``value`` if ``token`` passes the fence for ``key``.

        In Redis Cluster, hash-tag ``data_key`` with ``{key}`` so both share a slot.
        """
        self._run(key, token, allow_equal, [data_key], value)

    def _run(
        self, key: str, token: int, allow_equal: bool, extra_keys: list[str], value: str = ""
    ) -> None:
        accepted, last = self._fence.check(
            self.fence_key(key), token, allow_equal, extra_keys, value
        )
        if not accepted:
            raise self._reject(key, token, last)

    def last(self, key: str) -> int | None:
        """The last token accepted for ``key``."""
        return self._fence.last(self.fence_key(key))

    def close(self) -> None:
        """Close the guard's connection."""
        self._fence.close()
