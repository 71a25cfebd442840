"""``redlock://``: leases on a quorum of independent Redis masters, with a fencing token.

Written for asyncio (a step asks every node at once); the blocking face runs it on
one shared event loop (:mod:`fencelock.backends.shared_loop`).
"""

from __future__ import annotations

from fencelock.backends.redlock.backend import AsyncRedlockBackend, node_options
from fencelock.backends.shared_loop import SharedLoopBackend
from fencelock.engine.urls import ParsedURL


def open_sync(parsed: ParsedURL) -> SharedLoopBackend:
    node_options(parsed)  # fail fast on bad input, in the caller's thread
    return SharedLoopBackend(lambda: AsyncRedlockBackend(parsed))


def open_async(parsed: ParsedURL) -> AsyncRedlockBackend:
    return AsyncRedlockBackend(parsed)
