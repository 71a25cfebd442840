"""``mysql://``: MySQL/MariaDB named locks (``GET_LOCK``) through aiomysql.

Written for asyncio; the blocking face runs it on one shared event loop
(:mod:`fencelock.backends.shared_loop`).
"""

from __future__ import annotations

from fencelock.backends.mysql.backend import AsyncMySQLBackend
from fencelock.backends.mysql.options import mysql_options
from fencelock.backends.shared_loop import SharedLoopBackend
from fencelock.engine.urls import ParsedURL


def open_sync(parsed: ParsedURL) -> SharedLoopBackend:
    mysql_options(parsed)  # fail fast on bad input, in the caller's thread
    return SharedLoopBackend(lambda: AsyncMySQLBackend(parsed))


def open_async(parsed: ParsedURL) -> AsyncMySQLBackend:
    return AsyncMySQLBackend(parsed)
