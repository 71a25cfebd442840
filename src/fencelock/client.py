"""Clients: one backend and one renewer each; they make the primitives."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar
from urllib.parse import urlencode

from fencelock.backends import open_async_backend, open_backend, url_of
from fencelock.backends.base import AsyncBackend, Backend, LockInfo
from fencelock.client_internals import ClientInternals
from fencelock.client_leases import Holdings
from fencelock.engine.names import validate_name, validate_prefix
from fencelock.engine.timing import validate_ttl
from fencelock.errors import ConfigError, FencelockError
from fencelock.lease import AsyncLease, Lease, LeaseBase, Tracker
from fencelock.log import log
from fencelock.primitives.lock import AsyncLock, Lock, _LockBase, is_held
from fencelock.renewer import AsyncRenewer, Renewer

if TYPE_CHECKING:  # the rest of the family is imported when first asked for
    from fencelock.primitives.barrier import (
        AsyncBarrier,
        AsyncDoubleBarrier,
        Barrier,
        DoubleBarrier,
    )
    from fencelock.primitives.election import AsyncElection, Election
    from fencelock.primitives.group import AsyncGroup, Group
    from fencelock.primitives.latch import AsyncLatch, Latch
    from fencelock.primitives.multi import AsyncMultiLock, MultiLock, _MultiLockBase
    from fencelock.primitives.rwlock import AsyncRWLock, RWLock
    from fencelock.primitives.semaphore import AsyncSemaphore, Semaphore, _SemaphoreBase

B = TypeVar("B", Backend, AsyncBackend)
L = TypeVar("L", bound=LeaseBase)
# each colour's lock, multi-lock and semaphore
K = TypeVar("K", bound="_LockBase[Any, Any]")
M = TypeVar("M", bound="_MultiLockBase[Any, Any]")
S = TypeVar("S", bound="_SemaphoreBase[Any, Any]")

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
    url = default_url() if url is None else url_of(url)
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


@contextlib.contextmanager
def _releasing_forgotten(lease: LeaseBase) -> Iterator[None]:
    """Around the release of a lease still held as its client closes: both are logged."""
    log.warning(
        "fencelock: lease on %r (token %d) was never released; releasing it as the client closes",
        lease.name,
        lease.token,
    )
    try:
        yield
    except FencelockError as exc:
        log.warning("fencelock: releasing %r as the client closes: %s", lease.name, exc)


class _ClientBase(Generic[B, L, K, M, S]):
    """What both variants of client are: one backend, and the leases taken through it
    (which go to the client's renewer from there); the primitives both make, with their
    arguments checked (each variant says which class it makes)."""

    _lock_type: type[K]

    def __init__(self, backend: B, renewer: Tracker[L]) -> None:
        self._backend: B = backend
        self._holdings: Holdings[L] = Holdings(renewer)
        self.internals: ClientInternals[B, L] = ClientInternals(backend, self._holdings)
        """What primitives built on this client use of it (:mod:`fencelock.client_internals`)."""

    @property
    def url(self) -> str:
        """The backend's URL, with any password replaced by ``***``."""
        return self._backend.url

    def held(self) -> list[L]:
        """The leases this client holds now (taken and neither released nor lost)."""
        return self._holdings.held()

    def lock(
        self,
        name: str,
        *,
        ttl: float = DEFAULT_TTL,
        renew: bool = True,
        timeout: float | None = None,
        fair: bool = False,
        max_hold: float | None = None,
        stop_on_loss: bool = False,
        reentrant: bool = False,
    ) -> K:
        """A mutual-exclusion lock on ``name`` (a :class:`Lock`; from an
        :class:`AsyncClient`, an :class:`AsyncLock` for ``async with``).

        ``ttl``: seconds the lease lives without renewal (default 30); ``renew=False``
        gives a plain TTL lease. ``timeout``: how long ``with lock:`` waits (None: forever).
        ``fair=True``: waiters get the lock in arrival order (where the backend can).
        ``max_hold``: seconds after which a lease is no longer renewed and ends as lost,
        however long the holder takes. ``stop_on_loss=True``: a loss raises
        :class:`LeaseLost` in the thread running ``with lock:`` at its next bytecode
        (:mod:`fencelock.stopping` says where that cannot reach); on asyncio it cancels
        the task running ``async with lock:`` the moment the lease is lost, and leaving
        the block then raises :class:`LeaseLost`. ``reentrant=True``: the thread (or
        task) holding it may take it again (one lease, one token, counted; the
        outermost release gives it back).

        :param name: the lock's name (every process locking it names it the same).
        :param ttl: seconds the lease lives without renewal (default 30).
        :param renew: keep the lease alive in the background while held.
        :param timeout: how long ``with lock:`` waits; None: forever.
        :param fair: waiters get the lock in arrival order.
        :param max_hold: seconds after which the lease is no longer renewed.
        :param stop_on_loss: raise :class:`LeaseLost` in the holding thread on a loss
            (on asyncio: cancel the holding task).
        :param reentrant: the holding thread (or task) may take it again.
        :returns: the lock (nothing is taken until ``with`` or ``acquire()``).
        :raises ConfigError: a bad name or TTL, or ``fair=True`` where the backend
            cannot queue waiters.
        """
        _check_fair(self._backend.capabilities.fair, fair, self.url)
        return self._lock_type(
            self.internals,
            validate_name(name),
            ttl=validate_ttl(ttl),
            renew=renew,
            timeout=timeout,
            fair=fair,
            max_hold=max_hold,
            stop_on_loss=stop_on_loss,
            reentrant=reentrant,
        )

    def multi_lock(
        self,
        names: Iterable[str],
        *,
        ttl: float = DEFAULT_TTL,
        renew: bool = True,
        timeout: float | None = None,
    ) -> M:
        """Several names locked all or nothing, taken in sorted order so that two
        multi-locks over overlapping names never deadlock. Each name has its own lease
        and token (``multi.tokens``); losing one loses the whole multi-lease. ``ttl``:
        seconds each lease lives without renewal (default 30)."""
        return self._multi_lock_type()(self, names, validate_ttl(ttl), renew, timeout)

    def semaphore(
        self,
        name: str,
        *,
        permits: int,
        ttl: float = DEFAULT_TTL,
        timeout: float | None = None,
    ) -> S:
        """A semaphore of ``permits`` permits on ``name``; each permit is a lease with its
        own renewal and token, so a crashed holder's permit comes back after its TTL
        (``ttl``, default 30 seconds)."""
        return self._semaphore_type()(self, name, permits, validate_ttl(ttl), timeout)

    def _multi_lock_type(self) -> type[M]:
        raise NotImplementedError  # each variant imports its own when first asked for

    def _semaphore_type(self) -> type[S]:
        raise NotImplementedError


class Client(_ClientBase[Backend, Lease, Lock, "MultiLock", "Semaphore"]):
    """A connection to one lock backend (sync API). Close it, or use ``with``."""

    def __init__(self, backend: Backend) -> None:
        self._renewer = Renewer()
        super().__init__(backend, self._renewer)

    _lock_type = Lock

    def _multi_lock_type(self) -> type[MultiLock]:
        from fencelock.primitives.multi import MultiLock

        return MultiLock

    def _semaphore_type(self) -> type[Semaphore]:
        from fencelock.primitives.semaphore import Semaphore

        return Semaphore

    def rw_lock(
        self, name: str, *, ttl: float = DEFAULT_TTL, timeout: float | None = None
    ) -> RWLock:
        """A read-write lock on ``name``: ``with rw.read():`` shared, ``with rw.write():``
        alone; a waiting writer is not starved by new readers; a token per hold. ``ttl``:
        seconds each hold's lease lives without renewal (default 30)."""
        from fencelock.primitives.rwlock import RWLock

        return RWLock(self, name, validate_ttl(ttl), timeout)

    def latch(self, name: str) -> Latch:
        """A count-down latch on ``name``: ``try_set_count(n)``, ``count_down()``,
        ``wait()``; its count lives on the server (not on backends where a lease ends
        with its client: :class:`ConfigError` there)."""
        from fencelock.primitives.latch import Latch

        return Latch(self, name)

    def barrier(self, name: str, parties: int) -> Barrier:
        """A barrier: ``wait()`` blocks until ``parties`` parties have called it (one
        round per name; not on backends without latches: :class:`ConfigError`)."""
        from fencelock.primitives.barrier import Barrier

        return Barrier(self, name, parties)

    def double_barrier(self, name: str, parties: int) -> DoubleBarrier:
        """Enter together (``enter()``), leave together (``leave()``); as :meth:`barrier`."""
        from fencelock.primitives.barrier import DoubleBarrier

        return DoubleBarrier(self, name, parties)

    def election(self, name: str, *, ttl: float = DEFAULT_TTL) -> Election:
        """A leader election on ``name``: ``campaign()`` to lead (the term is the
        leader's fencing token), ``leader()`` and ``observe()`` to follow it. ``ttl``:
        seconds the leader's lease lives without renewal (default 30)."""
        from fencelock.primitives.election import Election

        return Election(self, name, ttl)

    def group(self, name: str, *, ttl: float = DEFAULT_TTL) -> Group:
        """A group ``name``: ``join(member, data)`` (kept alive by a lease),
        ``members()`` and ``watch()`` (who joined and left); split work among the
        members with :func:`fencelock.group.assign`. ``ttl``: seconds a member's lease
        lives without renewal (default 30)."""
        from fencelock.primitives.group import Group

        return Group(self, name, ttl)

    def inspect(self, name: str) -> LockInfo | None:
        """Holder, last token and remaining TTL of ``name``; None if never locked."""
        return self._backend.inspect(validate_name(name))

    def list(self, prefix: str = "") -> list[LockInfo]:
        """Held locks whose names start with ``prefix``."""
        return self._backend.list(validate_prefix(prefix))

    def evict(self, name: str) -> LockInfo | None:
        """End whoever holds ``name`` now, without its owner's consent (an operator's
        tool: ``fencelock release --force``). The holder finds its lease lost at its next
        renewal; the next holder's token is greater. What was held, or None if nothing."""
        info = self.inspect(name)
        if info is None or info.owner is None or not info.held:
            return None
        return info if self._backend.release(info.name, info.owner) else None

    def locked(self, name: str) -> bool:
        """Whether anyone (this client or another) holds ``name`` now."""
        return is_held(self.inspect(name))

    def close(self) -> None:
        """Release what is still held (logging each at WARNING), then close the backend."""
        for lease in self._holdings.close():
            with _releasing_forgotten(lease):
                lease.release()
        self._renewer.close()
        self._backend.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncClient(
    _ClientBase[AsyncBackend, AsyncLease, AsyncLock, "AsyncMultiLock", "AsyncSemaphore"]
):
    """A connection to one lock backend (asyncio API): ``async with fencelock.aconnect():``."""

    def __init__(self, backend: AsyncBackend) -> None:
        self._renewer = AsyncRenewer()
        super().__init__(backend, self._renewer)

    _lock_type = AsyncLock

    def _multi_lock_type(self) -> type[AsyncMultiLock]:
        from fencelock.primitives.multi import AsyncMultiLock

        return AsyncMultiLock

    def _semaphore_type(self) -> type[AsyncSemaphore]:
        from fencelock.primitives.semaphore import AsyncSemaphore

        return AsyncSemaphore

    def rw_lock(
        self, name: str, *, ttl: float = DEFAULT_TTL, timeout: float | None = None
    ) -> AsyncRWLock:
        """A read-write lock on ``name``; as :meth:`Client.rw_lock` (``ttl`` default 30
        seconds)."""
        from fencelock.primitives.rwlock import AsyncRWLock

        return AsyncRWLock(self, name, validate_ttl(ttl), timeout)

    def latch(self, name: str) -> AsyncLatch:
        """A count-down latch on ``name``; as :meth:`Client.latch`."""
        from fencelock.primitives.latch import AsyncLatch

        return AsyncLatch(self, name)

    def barrier(self, name: str, parties: int) -> AsyncBarrier:
        """A barrier; as :meth:`Client.barrier`."""
        from fencelock.primitives.barrier import AsyncBarrier

        return AsyncBarrier(self, name, parties)

    def double_barrier(self, name: str, parties: int) -> AsyncDoubleBarrier:
        """A double barrier; as :meth:`Client.double_barrier`."""
        from fencelock.primitives.barrier import AsyncDoubleBarrier

        return AsyncDoubleBarrier(self, name, parties)

    def election(self, name: str, *, ttl: float = DEFAULT_TTL) -> AsyncElection:
        """A leader election on ``name``; as :meth:`Client.election` (``ttl`` default 30
        seconds)."""
        from fencelock.primitives.election import AsyncElection

        return AsyncElection(self, name, ttl)

    def group(self, name: str, *, ttl: float = DEFAULT_TTL) -> AsyncGroup:
        """A group ``name``; as :meth:`Client.group` (``ttl`` default 30 seconds)."""
        from fencelock.primitives.group import AsyncGroup

        return AsyncGroup(self, name, ttl)

    async def inspect(self, name: str) -> LockInfo | None:
        """Holder, last token and remaining TTL of ``name``; None if never locked."""
        return await self._backend.inspect(validate_name(name))

    async def list(self, prefix: str = "") -> list[LockInfo]:
        """Held locks whose names start with ``prefix``."""
        return await self._backend.list(validate_prefix(prefix))

    async def evict(self, name: str) -> LockInfo | None:
        """End whoever holds ``name`` now; as :meth:`Client.evict`."""
        info = await self.inspect(name)
        if info is None or info.owner is None or not info.held:
            return None
        return info if await self._backend.release(info.name, info.owner) else None

    async def locked(self, name: str) -> bool:
        """Whether anyone (this client or another) holds ``name`` now."""
        return is_held(await self.inspect(name))

    async def aclose(self) -> None:
        """Release what is still held (logging each at WARNING), then close the backend."""
        for lease in self._holdings.close():
            with _releasing_forgotten(lease):
                await lease.release()
        await self._renewer.close()
        await self._backend.close()

    async def __aenter__(self) -> AsyncClient:
        """Connect: an unreachable server fails here, as :func:`connect` does."""
        try:
            await self._backend.open()
        except BaseException:
            await self._backend.close()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def connect(url: str | object | None = None, **options: object) -> Client:
    """Connect to the backend at ``url`` (default: ``$FENCELOCK_URL`` or embedded SQLite).

    ``options`` are the URL's query options (docs/backends.md), e.g.
    ``connect("redis://cache:6379/0", timeout=2)``; one given twice is an error.
    ``url`` may also be a ``redis.Redis`` or ``ConnectionPool``: fencelock takes its
    connection settings and opens connections of its own.

    :param url: the backend's URL (``redis://``, ``sqlite:///``, ``etcd://``...), a
        redis-py client or pool, or None for ``$FENCELOCK_URL`` or embedded SQLite.
    :param options: query options added to the URL (numbers, strings, bools).
    :returns: the client; close it, or use ``with``.
    :raises ConfigError: an unknown scheme or option, or a value of the wrong type.
    :raises BackendUnavailable: the server cannot be reached.
    """
    return Client(open_backend(_resolve_url(url, options)))


def aconnect(url: str | object | None = None, **options: object) -> AsyncClient:
    """The asyncio client for ``url`` and ``options`` (as :func:`connect`).

    Use ``async with`` (it connects, and fails there if the server is unreachable).

    :param url: as :func:`connect`.
    :param options: as :func:`connect`.
    :returns: the client, not yet connected: ``async with`` connects it.
    :raises ConfigError: an unknown scheme or option, or a value of the wrong type.
    """
    return AsyncClient(open_async_backend(_resolve_url(url, options)))
