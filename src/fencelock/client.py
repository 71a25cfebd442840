"""Clients: one backend and one renewer each; they make the primitives."""

from __future__ import annotations

import os
from pathlib import Path
from types import TracebackType

from fencelock.backends import open_async_backend, open_backend
from fencelock.backends.base import AsyncBackend, Backend, LockInfo
from fencelock.engine.names import validate_name, validate_prefix
from fencelock.engine.timing import validate_ttl
from fencelock.errors import ConfigError
from fencelock.primitives.lock import AsyncLock, Lock
from fencelock.renewal import AsyncRenewer, Renewer

DEFAULT_TTL = 30.0


def default_url() -> str:
    """``$FENCELOCK_URL``, else an SQLite file in the user's state directory."""
    from_env = os.environ.get("FENCELOCK_URL")
    if from_env:
        return from_env
    state_home = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return "sqlite:///" + str(Path(state_home) / "fencelock" / "locks.db")


def _check_fair(supported: bool, fair: bool, url: str) -> None:
    if fair and not supported:
        scheme = url.split(":", 1)[0]
        raise ConfigError(f"fair locks are not available on {scheme}:// (see docs/backends.md)")


def _resolve_url(url: str | None, options: dict[str, object]) -> str:
    if options:
        raise ConfigError(f"unknown option {sorted(options)[0]!r} for connect()")
    return default_url() if url is None else url


class Client:
    """A connection to one lock backend (sync API). Close it, or use ``with``."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.renewer = Renewer(backend)

    @property
    def url(self) -> str:
        return self.backend.url

    def lock(
        self,
        name: str,
        *,
        ttl: float = DEFAULT_TTL,
        renew: bool = True,
        timeout: float | None = None,
        fair: bool = False,
    ) -> Lock:
        """A mutual-exclusion lock on ``name``.

        ``ttl``: seconds the lease lives without renewal; ``renew=False`` gives a
        plain TTL lease. ``timeout``: how long ``with lock:`` waits (None: forever).
        ``fair=True``: waiters get the lock in arrival order (where the backend can).
        """
        _check_fair(self.backend.supports_fair, fair, self.url)
        return Lock(self, validate_name(name), validate_ttl(ttl), renew, timeout, fair)

    def inspect(self, name: str) -> LockInfo | None:
        """Holder, last token and remaining TTL of ``name``; None if never locked."""
        return self.backend.inspect(validate_name(name))

    def list(self, prefix: str = "") -> list[LockInfo]:
        """Held locks whose names start with ``prefix``."""
        return self.backend.list(validate_prefix(prefix))

    def close(self) -> None:
        """Stop renewing (held leases will expire) and close the backend."""
        self.renewer.close()
        self.backend.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncClient:
    """A connection to one lock backend (asyncio API): ``async with fencelock.aconnect():``."""

    def __init__(self, backend: AsyncBackend) -> None:
        self.backend = backend
        self.renewer = AsyncRenewer(backend)

    @property
    def url(self) -> str:
        return self.backend.url

    def lock(
        self,
        name: str,
        *,
        ttl: float = DEFAULT_TTL,
        renew: bool = True,
        timeout: float | None = None,
        fair: bool = False,
    ) -> AsyncLock:
        """A mutual-exclusion lock on ``name`` for asyncio; arguments as :meth:`Client.lock`."""
        _check_fair(self.backend.supports_fair, fair, self.url)
        return AsyncLock(self, validate_name(name), validate_ttl(ttl), renew, timeout, fair)

    async def inspect(self, name: str) -> LockInfo | None:
        return await self.backend.inspect(validate_name(name))

    async def list(self, prefix: str = "") -> list[LockInfo]:
        return await self.backend.list(validate_prefix(prefix))

    async def aclose(self) -> None:
        """Stop renewing and close the backend."""
        await self.renewer.close()
        await self.backend.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def connect(url: str | None = None, **options: object) -> Client:
    """Connect to the backend at ``url`` (default: ``$FENCELOCK_URL`` or embedded SQLite)."""
    return Client(open_backend(_resolve_url(url, options)))


def aconnect(url: str | None = None, **options: object) -> AsyncClient:
    """The asyncio client for ``url``; use ``async with`` or ``await client.aclose()``."""
    return AsyncClient(open_async_backend(_resolve_url(url, options)))
