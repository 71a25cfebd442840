"""``sqlite:///path``: leases in one SQLite file, for the processes of one host.

:mod:`sqlite3` blocks, so the asyncio face runs it in threads
(:mod:`fencelock.backends.threaded`); waiters are woken by :mod:`.doorbell`.
"""

from __future__ import annotations

from fencelock.backends.sqlite.backend import SQLiteBackend, database_path
from fencelock.backends.threaded import ThreadedAsyncBackend
from fencelock.engine.urls import ParsedURL

__all__ = ["SQLiteBackend", "database_path", "open_async", "open_sync"]


def open_sync(parsed: ParsedURL) -> SQLiteBackend:
    return SQLiteBackend(parsed)


def open_async(parsed: ParsedURL) -> ThreadedAsyncBackend:
    return ThreadedAsyncBackend(SQLiteBackend(parsed))
