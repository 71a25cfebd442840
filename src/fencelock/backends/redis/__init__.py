"""``redis://`` and ``rediss://``: one Redis server, with native sync and asyncio drivers.

The protocol is written once, without I/O: the conversations (:mod:`.talks`), an
attempt's leftovers (:mod:`.attempt`), the wake-up subscription (:mod:`.wakeups`).
The drivers (:mod:`.sync_backend`, :mod:`.async_backend`, :mod:`.wire`,
:mod:`.listener`) only send, read and wait.
"""

from __future__ import annotations

from fencelock.backends.base import AsyncBackend, Backend
from fencelock.backends.redis.async_backend import AsyncRedisBackend
from fencelock.backends.redis.options import CLUSTER_SCHEMES
from fencelock.backends.redis.sync_backend import RedisBackend
from fencelock.engine.urls import ParsedURL


def open_sync(parsed: ParsedURL) -> Backend:
    if parsed.scheme in CLUSTER_SCHEMES:
        from fencelock.backends.redis.cluster import RedisClusterBackend

        return RedisClusterBackend(parsed)
    return RedisBackend(parsed)


def open_async(parsed: ParsedURL) -> AsyncBackend:
    if parsed.scheme in CLUSTER_SCHEMES:
        from fencelock.backends.redis.cluster import RedisClusterBackend
        from fencelock.backends.threaded import ThreadedAsyncBackend

        return ThreadedAsyncBackend(RedisClusterBackend(parsed))
    return AsyncRedisBackend(parsed)
