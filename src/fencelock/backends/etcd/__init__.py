"""``etcd://`` and ``etcds://``: etcd v3 through its JSON gateway (``wire.py``), one session
lease per client and TTL, etcd's own queue recipe, the create revision as token.

Written for asyncio (a waiter's watch streams while the loop runs); the blocking
face runs it on one shared event loop (:mod:`fencelock.backends.shared_loop`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fencelock.engine.urls import ParsedURL

if TYPE_CHECKING:  # the registry imports this package on a plain install: no driver here
    from fencelock.backends.etcd.backend import AsyncEtcdBackend
    from fencelock.backends.shared_loop import SharedLoopBackend


def open_sync(parsed: ParsedURL) -> SharedLoopBackend:
    from fencelock.backends.etcd.backend import AsyncEtcdBackend
    from fencelock.backends.etcd.options import etcd_options
    from fencelock.backends.shared_loop import SharedLoopBackend

    return SharedLoopBackend.for_url(AsyncEtcdBackend, parsed, check=etcd_options)


def open_async(parsed: ParsedURL) -> AsyncEtcdBackend:
    from fencelock.backends.etcd.backend import AsyncEtcdBackend

    return AsyncEtcdBackend(parsed)
