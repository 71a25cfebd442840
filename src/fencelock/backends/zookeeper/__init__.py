"""``zookeeper://``: ZooKeeper through kazoo, a queue of ephemeral sequential nodes,
one session per client and TTL, the holder node's czxid as token.

Written for asyncio over kazoo's ``*_async`` calls; the blocking face runs it on
one shared event loop (:mod:`fencelock.backends.shared_loop`).
"""

from __future__ import annotations

from fencelock.backends.asyncio_family import asyncio_family

open_sync, open_async = asyncio_family(
    "fencelock.backends.zookeeper.backend.AsyncZooKeeperBackend",
    "fencelock.backends.zookeeper.options.zookeeper_options",
)
