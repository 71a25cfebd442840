"""``etcd://`` and ``etcds://``: etcd v3 through its JSON gateway (``wire.py``), one session
lease per client and TTL, etcd's own queue recipe, the create revision as token.

Written for asyncio (a waiter's watch streams while the loop runs); the blocking
face runs it on one shared event loop (:mod:`fencelock.backends.shared_loop`).
"""

from __future__ import annotations

from fencelock.backends.etcd.backend import AsyncEtcdBackend
from fencelock.backends.etcd.options import etcd_options
from fencelock.backends.shared_loop import SharedLoopBackend
from fencelock.engine.urls import ParsedURL


def open_sync(parsed: ParsedURL) -> SharedLoopBackend:
    etcd_options(parsed)  # fail fast on bad input, in the caller's thread
    return SharedLoopBackend(lambda: AsyncEtcdBackend(parsed))


def open_async(parsed: ParsedURL) -> AsyncEtcdBackend:
    return AsyncEtcdBackend(parsed)
