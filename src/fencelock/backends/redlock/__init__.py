"""``redlock://``: leases on a quorum of independent Redis masters, with a fencing token.

Written for asyncio (a step asks every node at once); the blocking face runs it on
one shared event loop (:mod:`fencelock.backends.shared_loop`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fencelock.engine.urls import ParsedURL

if TYPE_CHECKING:  # the registry imports this package on a plain install: no driver here
    from fencelock.backends.redlock.backend import AsyncRedlockBackend
    from fencelock.backends.shared_loop import SharedLoopBackend


def open_sync(parsed: ParsedURL) -> SharedLoopBackend:
    from fencelock.backends.redlock.backend import AsyncRedlockBackend, node_options
    from fencelock.backends.shared_loop import SharedLoopBackend

    return SharedLoopBackend.for_url(AsyncRedlockBackend, parsed, check=node_options)


def open_async(parsed: ParsedURL) -> AsyncRedlockBackend:
    from fencelock.backends.redlock.backend import AsyncRedlockBackend

    return AsyncRedlockBackend(parsed)
