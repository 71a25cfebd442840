"""``etcd://`` and ``etcds://``: etcd v3 through its JSON gateway (``wire.py``), one session
lease per client and TTL, etcd's own queue recipe, the create revision as token.

Written for asyncio (a waiter's watch streams while the loop runs); the blocking
face runs it on one shared event loop (:mod:`fencelock.backends.shared_loop`).
"""

from __future__ import annotations

from fencelock.backends.asyncio_family import asyncio_family

open_sync, open_async = asyncio_family(
    "fencelock.backends.etcd.backend.AsyncEtcdBackend",
    "fencelock.backends.etcd.options.etcd_options",
)
