"""The openers of a family written for asyncio only: ``open_async`` makes its backend,
and ``open_sync`` runs that backend on the shared event loop
(:mod:`fencelock.backends.shared_loop`). The family's modules, and its driver, load when
a URL of it is opened, not when the registry imports the family's package."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fencelock.engine.urls import ParsedURL

if TYPE_CHECKING:
    from fencelock.backends.base import AsyncBackend
    from fencelock.backends.shared_loop import SharedLoopBackend

Openers = tuple[Callable[[ParsedURL], "SharedLoopBackend"], Callable[[ParsedURL], "AsyncBackend"]]


def asyncio_family(backend: str, check: str) -> Openers:
    """``open_sync`` and ``open_async`` of the backend class at the dotted path
    ``backend``, whose URL is read first by the function at ``check`` (so bad input
    fails before a loop is made)."""

    def open_sync(parsed: ParsedURL) -> SharedLoopBackend:
        from fencelock.backends.shared_loop import SharedLoopBackend

        return SharedLoopBackend.for_url(_named(backend), parsed, check=_named(check))

    def open_async(parsed: ParsedURL) -> AsyncBackend:
        made: AsyncBackend = _named(backend)(parsed)
        return made

    return open_sync, open_async


def _named(path: str) -> Any:
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)
