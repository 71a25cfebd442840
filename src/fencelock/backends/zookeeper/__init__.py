"""``zookeeper://``: ZooKeeper through kazoo, a queue of ephemeral sequential nodes,
one session per client and TTL, the holder node's czxid as token.

Written for asyncio over kazoo's ``*_async`` calls; the blocking face runs it on
one shared event loop (:mod:`fencelock.backends.shared_loop`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fencelock.engine.urls import ParsedURL

if TYPE_CHECKING:  # the registry imports this package on a plain install: no driver here
    from fencelock.backends.shared_loop import SharedLoopBackend
    from fencelock.backends.zookeeper.backend import AsyncZooKeeperBackend


def open_sync(parsed: ParsedURL) -> SharedLoopBackend:
    from fencelock.backends.shared_loop import SharedLoopBackend
    from fencelock.backends.zookeeper.backend import AsyncZooKeeperBackend
    from fencelock.backends.zookeeper.options import zookeeper_options

    return SharedLoopBackend.for_url(AsyncZooKeeperBackend, parsed, check=zookeeper_options)


def open_async(parsed: ParsedURL) -> AsyncZooKeeperBackend:
    from fencelock.backends.zookeeper.backend import AsyncZooKeeperBackend

    return AsyncZooKeeperBackend(parsed)
