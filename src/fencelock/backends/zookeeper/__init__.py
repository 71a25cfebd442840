"""``zookeeper://``: ZooKeeper through kazoo, a queue of ephemeral sequential nodes,
one session per client and TTL, the holder node's czxid as token.

Written for asyncio over kazoo's ``*_async`` calls; the blocking face runs it on
one shared event loop (:mod:`fencelock.backends.shared_loop`).
"""

from __future__ import annotations

from fencelock.backends.shared_loop import SharedLoopBackend
from fencelock.backends.zookeeper.backend import AsyncZooKeeperBackend
from fencelock.backends.zookeeper.options import zookeeper_options
from fencelock.engine.urls import ParsedURL


def open_sync(parsed: ParsedURL) -> SharedLoopBackend:
    zookeeper_options(parsed)  # fail fast on bad input, in the caller's thread
    return SharedLoopBackend(lambda: AsyncZooKeeperBackend(parsed))


def open_async(parsed: ParsedURL) -> AsyncZooKeeperBackend:
    return AsyncZooKeeperBackend(parsed)
