"""``redis://`` and ``rediss://``: one Redis server, with native sync and asyncio drivers.

The protocol is written once, without I/O: the conversations (:mod:`.conversations`), an
attempt's leftovers (:mod:`.attempt`), the wake-up subscription (:mod:`.wakeups`).
The drivers (:mod:`.sync_backend`, :mod:`.async_backend`, :mod:`.wire`,
:mod:`.listener`) only send, read and wait.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fencelock.engine.urls import ParsedURL

if TYPE_CHECKING:  # the registry imports this package on a plain install: no driver here
    from fencelock.backends.base import AsyncBackend, Backend


def open_sync(parsed: ParsedURL) -> Backend:
    from fencelock.backends.redis.options import CLUSTER_SCHEMES

    if parsed.scheme in CLUSTER_SCHEMES:
        from fencelock.backends.redis.cluster import RedisClusterBackend

        return RedisClusterBackend(parsed)
    from fencelock.backends.redis.sync_backend import RedisBackend

    return RedisBackend(parsed)


def open_async(parsed: ParsedURL) -> AsyncBackend:
    from fencelock.backends.redis.options import CLUSTER_SCHEMES

    if parsed.scheme in CLUSTER_SCHEMES:
        from fencelock.backends.redis.cluster import RedisClusterBackend
        from fencelock.backends.threaded import ThreadedAsyncBackend

        return ThreadedAsyncBackend(RedisClusterBackend(parsed))
    from fencelock.backends.redis.async_backend import AsyncRedisBackend

    return AsyncRedisBackend(parsed)
