"""``postgresql://``: a lease table with a token sequence, expiry by the database's own
clock, waiters woken by ``LISTEN``/``NOTIFY`` (psycopg 3); ``postgresql+advisory://``:
session advisory locks, tokens from the same sequence (:mod:`.advisory`).

Written for asyncio (psycopg's async connections); the blocking face runs it on one
shared event loop (:mod:`fencelock.backends.shared_loop`).
"""

from __future__ import annotations

from fencelock.backends.postgresql.advisory import AsyncAdvisoryBackend
from fencelock.backends.postgresql.backend import AsyncPostgresBackend
from fencelock.backends.postgresql.options import postgres_options
from fencelock.backends.shared_loop import SharedLoopBackend
from fencelock.engine.urls import ParsedURL


def open_sync(parsed: ParsedURL) -> SharedLoopBackend:
    postgres_options(parsed)  # fail fast on bad input, in the caller's thread
    return SharedLoopBackend(lambda: open_async(parsed))


def open_async(parsed: ParsedURL) -> AsyncPostgresBackend | AsyncAdvisoryBackend:
    if parsed.scheme.endswith("+advisory"):
        return AsyncAdvisoryBackend(parsed)
    return AsyncPostgresBackend(parsed)
