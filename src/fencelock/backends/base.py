"""The backend contract: one small protocol, in a sync and an asyncio variant.

An acquisition is an :class:`Attempt`: the backend may keep state in it (a queue
entry, a watch revision, a doorbell socket), ``wait`` belongs to it, and
``close`` removes whatever it left behind. Backends raise only fencelock errors;
driver exceptions are translated here, at the boundary, with the cause chained.

What the contract says for backends whose queue entry *is* the lock (etcd's key,
ZooKeeper's sequential node) and whose leases live in a shared session:

- **The handle is the owner.** Every acquisition has its own owner value (20
  random bytes); ``release``/``renew`` name it, and a backend keeps whatever else
  it needs of a held lease (its key, its node path, its session) under it from the
  moment ``try_acquire`` returns :class:`Acquired`.
- **``close()`` after success** closes the attempt, not the lease: what the holder
  holds stays until ``release``; only a waiter's leftovers (a queue entry never
  granted, a watch) go.
- **Waiting for the predecessor.** ``Busy(notified=True)``: the attempt is in the
  queue and ``wait`` returns when its predecessor leaves; the acquire loop calls
  ``wait`` again and again without a timer of its own (only a long liveness bound).
- **One session, many leases.** ``Acquired(session=...)`` names the
  :class:`~fencelock.engine.session.SharedSession` the lease is held in; the backend
  reports through it a suspension (at risk) or the end (lost) to all its leases at
  once. ``renew`` may answer :class:`RenewedAsOf` (the time of the session's
  keepalive that covers the lease) instead of sending a request per lease, so a
  thousand leases cost one keepalive per third of their TTL.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, cast

from fencelock.engine.outcomes import Acquired, AttemptResult, Busy, RenewedAsOf
from fencelock.errors import ConfigError, FencelockError
from fencelock.holder import Holder, holder_of

__all__ = [
    "Acquired",
    "AsyncAttempt",
    "AsyncBackend",
    "AsyncSharingBackend",
    "Attempt",
    "AttemptResult",
    "Backend",
    "Busy",
    "Capabilities",
    "LockInfo",
    "PermitsInUse",
    "RenewedAsOf",
    "Share",
    "SharingBackend",
    "async_sharing",
    "sharing",
]


@dataclass(frozen=True, kw_only=True)
class Capabilities:
    """What a backend can do beyond the lock protocol: one value every backend declares
    (``capabilities = Capabilities(...)``), so a misspelt capability is mypy's error,
    not a silent False. Each True names the protocol the backend also implements."""

    fair: bool = False  # waiters granted in arrival order
    shares: bool = False  # native read/write and permit queues: SharingBackend
    latches: bool = False  # count-down latches kept by the server: LatchingBackend
    name_watches: bool = False  # the server pushes changes of names: NameWatchingBackend
    keeps: bool = False  # a name kept after its lease by the server's clock: KeepingBackend
    keeps_announced: bool = False  # a keep ended early wakes the name's waiters
    renews_in_batches: bool = False  # many renewals in one request: BatchRenewingBackend
    steps: bool = False  # the blocking face may wait on its driver stepped (blocking_call.py)
    # ... and start a stepped call off the loop (its path needs no running loop until
    # it suspends, and every leaf that needs one calls blocking_call.onto_the_loop first)
    steps_off_the_loop: bool = False


@dataclass(frozen=True)
class LockInfo:
    """What a backend knows about one lock name."""

    name: str
    owner: str | None
    token: int
    remaining: float | None
    waiters: int | None = None
    since: float | None = None  # when the holder took it (Unix time), where the backend records it

    @property
    def held(self) -> bool:
        """Whether an owner holds the lock now (its lease has not expired)."""
        return self.owner is not None

    @property
    def holder(self) -> Holder | None:
        """Where the holder runs (host, PID, process start, command), as its owner value says."""
        return holder_of(self.owner)


class Attempt(Protocol):
    def try_acquire(self) -> AttemptResult:
        """Take the lease if free, issuing its token in the same atomic step."""

    def wait(self, timeout: float) -> None:
        """Return when the lease may have become free, or after ``timeout`` seconds."""

    def interrupt(self) -> None:
        """From any thread: make the wait under way (or the next one) return now
        (``lock.cancel()``); a spurious wake-up, which the acquire loop tolerates."""

    def close(self) -> None:
        """Forget this attempt: remove its queue entry or waiter registration."""


class Backend(Protocol):
    url: str
    capabilities: Capabilities
    request_bound: float  # seconds a request in flight may take past a call's end (its URL's)

    def outlives_client(self, renewed: bool) -> bool:
        """Whether a lease (``renewed`` or not) left to its TTL stays on the server after
        the client closes: not where it lives in the client's session or connection."""

    def attempt(
        self, name: str, owner: str, ttl: float, fair: bool = False, renewed: bool = True
    ) -> Attempt:
        """Start an acquisition of ``name`` by ``owner`` (no I/O yet); FIFO if ``fair``.

        ``renewed=False``: the lease will never be renewed, so it must end on the
        server by its TTL even while other leases of this client are kept alive."""

    def release(self, name: str, owner: str) -> bool:
        """Compare-and-delete; False if ``owner`` no longer held the lease."""

    def renew(self, name: str, owner: str, ttl: float) -> bool | RenewedAsOf:
        """Compare-and-extend to ``ttl`` from now; False if ``owner`` no longer holds it.

        A session backend may answer :class:`RenewedAsOf` instead (see above)."""

    def inspect(self, name: str) -> LockInfo | None:
        """The lock's holder, last token and remaining TTL; None if never used."""

    def list(self, prefix: str) -> list[LockInfo]:
        """Held locks whose names start with ``prefix``."""

    def waiters(self, name: str) -> builtins.list[str] | None:
        """The owner values of ``name``'s queued waiters, first in line first (the
        holder not among them), where the backend keeps a line of owners; None where it
        keeps none (MySQL's ``GET_LOCK``, Redlock's independent masters)."""

    def close(self) -> None: ...


class AsyncAttempt(Protocol):
    async def try_acquire(self) -> AttemptResult: ...

    async def wait(self, timeout: float) -> None: ...

    async def close(self) -> None: ...


class AsyncBackend(Protocol):
    url: str
    capabilities: Capabilities
    request_bound: float

    def outlives_client(self, renewed: bool) -> bool: ...

    async def open(self) -> None:
        """Check the server answers (``async with aconnect()`` calls it); else raise."""

    def attempt(
        self, name: str, owner: str, ttl: float, fair: bool = False, renewed: bool = True
    ) -> AsyncAttempt: ...

    async def release(self, name: str, owner: str) -> bool: ...

    async def renew(self, name: str, owner: str, ttl: float) -> bool | RenewedAsOf: ...

    async def inspect(self, name: str) -> LockInfo | None: ...

    async def list(self, prefix: str) -> list[LockInfo]: ...

    async def waiters(self, name: str) -> builtins.list[str] | None: ...

    async def close(self) -> None: ...


@dataclass(frozen=True)
class Share:
    """How a queue entry shares its name, on a backend with a native recipe for it: a
    ``read`` entry with other readers, a ``write`` entry with nobody, a ``permit`` entry
    with ``permits - 1`` other permits (ZooKeeper's read/write and semaphore nodes)."""

    kind: Literal["read", "write", "permit"]
    permits: int = 1


class PermitsInUse(ConfigError):
    """A permit entry met permits of another count in the line (``held_with``)."""

    def __init__(self, name: str, held_with: int, asked: int) -> None:
        super().__init__(f"{name!r} is in use with {held_with} permits; asked with {asked}")
        self.held_with = held_with


class SharingBackend(Backend, Protocol):
    """A backend whose queue shares a name natively (``Capabilities(shares=True)``)."""

    def shared_attempt(self, name: str, owner: str, ttl: float, share: Share) -> Attempt: ...


class AsyncSharingBackend(AsyncBackend, Protocol):
    def shared_attempt(self, name: str, owner: str, ttl: float, share: Share) -> AsyncAttempt: ...


def sharing(backend: Backend) -> SharingBackend | None:
    """``backend`` as one with native read/write and permit queues, or None."""
    return cast(SharingBackend, backend) if backend.capabilities.shares else None


def async_sharing(backend: AsyncBackend) -> AsyncSharingBackend | None:
    return cast(AsyncSharingBackend, backend) if backend.capabilities.shares else None


class NativeLatch(Protocol):
    """A count-down latch a backend keeps itself (``Capabilities(latches=True)``): the count
    outlives every client even where leases end with theirs (ZooKeeper)."""

    def try_set_count(self, count: int) -> bool: ...

    def count_down(self) -> bool: ...

    def count(self) -> int: ...

    def wait(self, timeout: float | None) -> bool: ...


class AsyncNativeLatch(Protocol):
    async def try_set_count(self, count: int) -> bool: ...

    async def count_down(self) -> bool: ...

    async def count(self) -> int: ...

    async def wait(self, timeout: float | None) -> bool: ...


class LatchingBackend(Backend, Protocol):
    def latch(self, name: str) -> NativeLatch: ...


class AsyncLatchingBackend(AsyncBackend, Protocol):
    def latch(self, name: str) -> AsyncNativeLatch: ...


def latching(backend: Backend) -> LatchingBackend | None:
    """``backend`` as one that keeps latches itself, or None."""
    return cast(LatchingBackend, backend) if backend.capabilities.latches else None


def async_latching(backend: AsyncBackend) -> AsyncLatchingBackend | None:
    ok = backend.capabilities.latches
    return cast(AsyncLatchingBackend, backend) if ok else None


class NameWatch(Protocol):
    """Pushed news of the names under some prefixes (``Capabilities(name_watches=True)``: a
    server's own watch, etcd's or ZooKeeper's), for a group's watchers."""

    def changed(self, timeout: float) -> bool:
        """Until a name under the prefixes may have changed since the watch began or
        the last call returned, or ``timeout``; True if one may have."""

    def close(self) -> None: ...


class AsyncNameWatch(Protocol):
    async def changed(self, timeout: float) -> bool: ...

    async def close(self) -> None: ...


class NameWatchingBackend(Backend, Protocol):
    def watch_names(self, prefixes: Sequence[str]) -> NameWatch: ...


class AsyncNameWatchingBackend(AsyncBackend, Protocol):
    def watch_names(self, prefixes: Sequence[str]) -> AsyncNameWatch: ...


def name_watching(backend: Backend) -> NameWatchingBackend | None:
    """``backend`` as one whose server pushes changes of names, or None."""
    ok = backend.capabilities.name_watches
    return cast(NameWatchingBackend, backend) if ok else None


def async_name_watching(backend: AsyncBackend) -> AsyncNameWatchingBackend | None:
    ok = backend.capabilities.name_watches
    return cast(AsyncNameWatchingBackend, backend) if ok else None


class KeepingBackend(Backend, Protocol):
    """A backend that keeps a name taken after its lease ends (``Capabilities(keeps=True)``),
    where a lease itself cannot outlive its client (ZooKeeper)."""

    def keep(self, name: str, owner: str, seconds: float) -> bool:
        """End ``owner``'s lease; ``name`` stays taken ``seconds`` more by the server's
        clock. False if the lease was not held any more."""


class AsyncKeepingBackend(AsyncBackend, Protocol):
    async def keep(self, name: str, owner: str, seconds: float) -> bool: ...


def keeping(backend: Backend) -> KeepingBackend | None:
    """``backend`` as one that keeps names after their leases, or None."""
    return cast(KeepingBackend, backend) if backend.capabilities.keeps else None


def async_keeping(backend: AsyncBackend) -> AsyncKeepingBackend | None:
    ok = backend.capabilities.keeps
    return cast(AsyncKeepingBackend, backend) if ok else None


Renewal = tuple[str, str, float]  # a lease's name, owner and the TTL to renew it to
RenewOutcome = bool | RenewedAsOf | FencelockError


class BatchRenewingBackend(Backend, Protocol):
    """A backend that renews many leases in one request (``renews_in_batches``)."""

    def renew_many(self, renewals: Sequence[Renewal]) -> list[RenewOutcome]:
        """:meth:`Backend.renew` of each, in one request: an outcome each, in order (the
        error that left one unknown, where the request was split across servers). A
        failure of the request raises, for all of them."""


class AsyncBatchRenewingBackend(AsyncBackend, Protocol):
    async def renew_many(self, renewals: Sequence[Renewal]) -> list[RenewOutcome]: ...


async def renew_each(
    renew: Callable[[str, str, float], Awaitable[bool | RenewedAsOf]], renewals: Sequence[Renewal]
) -> list[RenewOutcome]:
    """``renew_many`` for a backend whose renewals are each their own (etcd and ZooKeeper
    answer from the session; Redlock, MySQL and the advisory mode send one apiece): all at
    once on its loop, one trip there for the batch, requests pipelined where the
    connections allow. One lease's fencelock error is its own outcome."""
    done = await asyncio.gather(
        *(renew(name, owner, ttl) for name, owner, ttl in renewals), return_exceptions=True
    )
    for outcome in done:
        if isinstance(outcome, BaseException) and not isinstance(outcome, FencelockError):
            raise outcome
    return cast(list[RenewOutcome], done)


class _RenewsOne(Protocol):
    async def renew(self, name: str, owner: str, ttl: float) -> bool | RenewedAsOf: ...


class EndsWithItsSession:
    """For a backend whose leases live in the client's session or connection (a
    ZooKeeper ephemeral node, a PostgreSQL advisory lock, a MySQL named lock): none
    outlives the client."""

    def outlives_client(self, renewed: bool) -> bool:
        """Whether a lease left to its TTL stays on the server after the client closes."""
        return False


class RenewsEach:
    """``renew_many`` by :func:`renew_each`, for a backend whose renewals are each their
    own: a mixin of an asyncio backend class with a ``renew``."""

    async def renew_many(self: _RenewsOne, renewals: Sequence[Renewal]) -> list[RenewOutcome]:
        return await renew_each(self.renew, renewals)


def batch_renewing(backend: Backend) -> BatchRenewingBackend | None:
    """``backend`` as one that renews many leases in one request, or None."""
    ok = backend.capabilities.renews_in_batches
    return cast(BatchRenewingBackend, backend) if ok else None


def async_batch_renewing(backend: AsyncBackend) -> AsyncBatchRenewingBackend | None:
    ok = backend.capabilities.renews_in_batches
    return cast(AsyncBatchRenewingBackend, backend) if ok else None


def leaves_names_taken(backend: Backend | AsyncBackend, renewed: bool) -> bool:
    """Whether a name can stay taken after its lease for a while (``expire_in``,
    run-once's ``at_least``): its lease outlives the client, or the backend keeps it."""
    return backend.outlives_client(renewed) or backend.capabilities.keeps


def holds_latches(backend: Backend | AsyncBackend) -> bool:
    """Whether the backend can hold a latch: its unrenewed leases outlive the client, or
    it keeps latches itself, or it keeps names after their leases and wakes their
    waiters when a keep is ended early (``keeps_announced``): the generic latch then
    keeps its counts that way."""
    if backend.outlives_client(False) or backend.capabilities.latches:
        return True
    return bool(backend.capabilities.keeps and backend.capabilities.keeps_announced)
