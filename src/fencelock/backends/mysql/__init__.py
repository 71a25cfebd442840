"""``mysql://``: MySQL/MariaDB named locks (``GET_LOCK``) through aiomysql.

Written for asyncio; the blocking face runs it on one shared event loop
(:mod:`fencelock.backends.shared_loop`).
"""

from __future__ import annotations

from fencelock.backends.asyncio_family import asyncio_family
from fencelock.engine.urls import ParsedURL

open_sync, open_async = asyncio_family(
    "fencelock.backends.mysql.backend.AsyncMySQLBackend",
    "fencelock.backends.mysql.options.mysql_options",
)


def review_sql(parsed: ParsedURL) -> str:
    """Every statement the backend runs, for review (needs no driver)."""
    from fencelock.backends.mysql import statements
    from fencelock.backends.mysql.options import mysql_options

    return statements.review(mysql_options(parsed).database)
