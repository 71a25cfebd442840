"""``postgresql://``: a lease table with a token sequence, expiry by the database's own
clock, waiters woken by ``LISTEN``/``NOTIFY`` (psycopg 3); ``postgresql+advisory://``:
session advisory locks, tokens from the same sequence (:mod:`.advisory`).

Written for asyncio (psycopg's async connections); the blocking face runs it on one
shared event loop (:mod:`fencelock.backends.shared_loop`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fencelock.engine.urls import ParsedURL

if TYPE_CHECKING:  # the registry imports this package on a plain install: no driver here
    from fencelock.backends.postgresql.advisory import AsyncAdvisoryBackend
    from fencelock.backends.postgresql.backend import AsyncPostgresBackend
    from fencelock.backends.shared_loop import SharedLoopBackend


def open_sync(parsed: ParsedURL) -> SharedLoopBackend:
    from fencelock.backends.postgresql.options import postgres_options
    from fencelock.backends.shared_loop import SharedLoopBackend

    postgres_options(parsed)  # fail fast on bad input, in the caller's thread
    open_async_class(parsed)  # and on a missing driver
    return SharedLoopBackend(lambda: open_async(parsed))


def open_async(parsed: ParsedURL) -> AsyncPostgresBackend | AsyncAdvisoryBackend:
    return open_async_class(parsed)(parsed)


def open_async_class(
    parsed: ParsedURL,
) -> type[AsyncPostgresBackend] | type[AsyncAdvisoryBackend]:
    if parsed.scheme.endswith("+advisory"):
        from fencelock.backends.postgresql.advisory import AsyncAdvisoryBackend

        return AsyncAdvisoryBackend
    from fencelock.backends.postgresql.backend import AsyncPostgresBackend

    return AsyncPostgresBackend


def review_sql(parsed: ParsedURL) -> str:
    """Every statement the backend runs, for review (needs no driver)."""
    from fencelock.backends.postgresql import advisory_statements, statements
    from fencelock.backends.postgresql.options import postgres_options

    schema = postgres_options(parsed).schema
    if parsed.scheme.endswith("+advisory"):
        return advisory_statements.review(schema)
    return statements.review(schema)
