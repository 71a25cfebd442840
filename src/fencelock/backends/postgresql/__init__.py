"""``postgresql://``: a lease table with a token sequence, expiry by the database's own
clock, waiters woken by ``LISTEN``/``NOTIFY`` (psycopg 3).

Written for asyncio (psycopg's async connections); the blocking face runs it on one
shared event loop (:mod:`fencelock.backends.shared_loop`).
"""

from __future__ import annotations

from fencelock.backends.postgresql.backend import AsyncPostgresBackend
from fencelock.backends.postgresql.options import postgres_options
from fencelock.backends.shared_loop import SharedLoopBackend
from fencelock.engine.urls import ParsedURL


def open_sync(parsed: ParsedURL) -> SharedLoopBackend:
    postgres_options(parsed)  # fail fast on bad input, in the caller's thread
    return SharedLoopBackend(lambda: AsyncPostgresBackend(parsed))


def open_async(parsed: ParsedURL) -> AsyncPostgresBackend:
    return AsyncPostgresBackend(parsed)
