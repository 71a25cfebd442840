"""``mysql://``: MySQL/MariaDB named locks (``GET_LOCK``) through aiomysql.

Written for asyncio; the blocking face runs it on one shared event loop
(:mod:`fencelock.backends.shared_loop`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fencelock.engine.urls import ParsedURL

if TYPE_CHECKING:  # the registry imports this package on a plain install: no driver here
    from fencelock.backends.mysql.backend import AsyncMySQLBackend
    from fencelock.backends.shared_loop import SharedLoopBackend


def open_sync(parsed: ParsedURL) -> SharedLoopBackend:
    from fencelock.backends.mysql.backend import AsyncMySQLBackend
    from fencelock.backends.mysql.options import mysql_options
    from fencelock.backends.shared_loop import SharedLoopBackend

    return SharedLoopBackend.for_url(AsyncMySQLBackend, parsed, check=mysql_options)


def open_async(parsed: ParsedURL) -> AsyncMySQLBackend:
    from fencelock.backends.mysql.backend import AsyncMySQLBackend

    return AsyncMySQLBackend(parsed)


def review_sql(parsed: ParsedURL) -> str:
    """Every statement the backend runs, for review (needs no driver)."""
    from fencelock.backends.mysql import statements
    from fencelock.backends.mysql.options import mysql_options

    return statements.review(mysql_options(parsed).database)
