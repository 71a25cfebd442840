"""What a primitive uses of the client it is built on, as a structural type.

:class:`~fencelock.client.Client` and :class:`~fencelock.client.AsyncClient` are these
(checked by mypy where a client hands itself to a primitive), so the primitives never
import the client module: the client depends on them, one way.
"""

from __future__ import annotations

from typing import Protocol

from fencelock.backends.base import AsyncBackend, Backend, LockInfo
from fencelock.client_internals import ClientInternals
from fencelock.lease import AsyncLease, Lease
from fencelock.primitives.lock import AsyncLock, Lock


class ClientLike(Protocol):
    """A sync client, as far as the primitives built on it go."""

    @property
    def internals(self) -> ClientInternals[Backend, Lease]:
        """The client's backend and holdings."""

    @property
    def url(self) -> str:
        """The backend's URL, password hidden."""

    def lock(self, name: str, *, ttl: float = ..., renew: bool = ...) -> Lock:
        """A lock on ``name``."""

    def list(self, prefix: str = "") -> list[LockInfo]:
        """Held locks under ``prefix``."""

    def inspect(self, name: str) -> LockInfo | None:
        """What is known of ``name``."""

    def evict(self, name: str) -> LockInfo | None:
        """End whoever holds ``name``."""


class AsyncClientLike(Protocol):
    """An asyncio client, as far as the primitives built on it go."""

    @property
    def internals(self) -> ClientInternals[AsyncBackend, AsyncLease]:
        """The client's backend and holdings."""

    @property
    def url(self) -> str:
        """The backend's URL, password hidden."""

    def lock(self, name: str, *, ttl: float = ..., renew: bool = ...) -> AsyncLock:
        """A lock on ``name``."""

    async def list(self, prefix: str = "") -> list[LockInfo]:
        """Held locks under ``prefix``."""

    async def inspect(self, name: str) -> LockInfo | None:
        """What is known of ``name``."""

    async def evict(self, name: str) -> LockInfo | None:
        """End whoever holds ``name``."""
