"""``redlock://``: leases on a quorum of independent Redis masters, with a fencing token.

Written for asyncio (a step asks every node at once); the blocking face runs it on
one shared event loop (:mod:`fencelock.backends.shared_loop`).
"""

from __future__ import annotations

from fencelock.backends.asyncio_family import asyncio_family

open_sync, open_async = asyncio_family(
    "fencelock.backends.redlock.backend.AsyncRedlockBackend",
    "fencelock.backends.redlock.backend.node_options",
)
