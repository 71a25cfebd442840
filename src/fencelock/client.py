"""Clients: one backend and one renewer each; they make the primitives."""

from __future__ import annotations

import builtins
import logging
import os
from pathlib import Path
from types import TracebackType
from urllib.parse import urlencode

from fencelock.backends import open_async_backend, open_backend
from fencelock.backends.base import AsyncBackend, Backend, LockInfo
from fencelock.backends.redis_handoff import is_redis_object, url_from_redis
from fencelock.engine.names import validate_name, validate_prefix
from fencelock.engine.timing import validate_ttl
from fencelock.errors import ConfigError, FencelockError
from fencelock.holdings import Holdings
from fencelock.lease import AsyncLease, Lease, LeaseBase
from fencelock.primitives.lock import AsyncLock, Lock
from fencelock.renewer import AsyncRenewer, Renewer

log = logging.getLogger("fencelock")

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


def _resolve_url(url: object, options: dict[str, object]) -> str:
    """The URL (of a redis-py object, too) with ``options`` added to its query."""
    if url is None:
        url = default_url()
    elif is_redis_object(url):
        url = url_from_redis(url)
    if not isinstance(url, str):
        raise ConfigError(
            f"backend URL must be a str or a redis-py client, not {type(url).__name__}"
        )
    if not options:
        return url
    query = urlencode({key: _option_text(key, value) for key, value in options.items()})
    return url + ("&" if "?" in url else "?") + query


def _option_text(key: str, value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return str(value)
    raise ConfigError(f"option {key!r} must be a number, a string or a bool, not {value!r}")


def _forgotten(lease: LeaseBase) -> None:
    log.warning(
        "fencelock: lease on %r (token %d) was never released; releasing it as the client closes",
        lease.name,
        lease.token,
    )


def _release_failed(lease: LeaseBase, exc: FencelockError) -> None:
    log.warning("fencelock: releasing %r as the client closes: %s", lease.name, exc)


class Client:
    """A connection to one lock backend (sync API). Close it, or use ``with``."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.renewer = Renewer()
        self.holdings: Holdings[Lease] = Holdings(self.renewer)

    @property
    def url(self) -> str:
        """The backend's URL, with any password replaced by ``***``."""
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

    def locked(self, name: str) -> bool:
        """Whether anyone (this client or another) holds ``name`` now."""
        info = self.inspect(name)
        return info is not None and info.held

    def held(self) -> builtins.list[Lease]:
        """The leases this client holds now (taken and neither released nor lost)."""
        return self.holdings.held()

    def close(self) -> None:
        """Release what is still held (logging each at WARNING), then close the backend."""
        for lease in self.holdings.unreleased():
            _forgotten(lease)
            try:
                lease.release()
            except FencelockError as exc:
                _release_failed(lease, exc)
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
        self.renewer = AsyncRenewer()
        self.holdings: Holdings[AsyncLease] = Holdings(self.renewer)

    @property
    def url(self) -> str:
        """The backend's URL, with any password replaced by ``***``."""
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
        """Holder, last token and remaining TTL of ``name``; None if never locked."""
        return await self.backend.inspect(validate_name(name))

    async def list(self, prefix: str = "") -> list[LockInfo]:
        """Held locks whose names start with ``prefix``."""
        return await self.backend.list(validate_prefix(prefix))

    async def locked(self, name: str) -> bool:
        """Whether anyone (this client or another) holds ``name`` now."""
        info = await self.inspect(name)
        return info is not None and info.held

    def held(self) -> builtins.list[AsyncLease]:
        """The leases this client holds now (taken and neither released nor lost)."""
        return self.holdings.held()

    async def aclose(self) -> None:
        """Release what is still held (logging each at WARNING), then close the backend."""
        for lease in self.holdings.unreleased():
            _forgotten(lease)
            try:
                await lease.release()
            except FencelockError as exc:
                _release_failed(lease, exc)
        await self.renewer.close()
        await self.backend.close()

    async def __aenter__(self) -> AsyncClient:
        """Connect: an unreachable server fails here, as :func:`connect` does."""
        try:
            await self.backend.open()
        except BaseException:
            await self.backend.close()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def connect(url: str | object | None = None, **options: object) -> Client:
    """Connect to the backend at ``url`` (default: ``$FENCELOCK_URL`` or embedded SQLite).

    ``options`` are the URL's query options (docs/backends.md), e.g.
    ``connect("redis://cache:6379/0", timeout=2)``; one given twice is an error.
    ``url`` may also be a ``redis.Redis`` or ``ConnectionPool``: fencelock takes its
    connection settings and opens connections of its own.
    """
    return Client(open_backend(_resolve_url(url, options)))


def aconnect(url: str | object | None = None, **options: object) -> AsyncClient:
    """The asyncio client for ``url`` and ``options`` (as :func:`connect`).

    Use ``async with`` (it connects, and fails there if the server is unreachable).
    """
    return AsyncClient(open_async_backend(_resolve_url(url, options)))
