"""redis-py's ``Lock``, over fencelock: ``redis.lock(name, lock_class=Lock)`` or
``Lock(redis, name, timeout=...)``, with a fencing token on every hold.

The signature and errors are redis-py's (``LockError``, ``LockNotOwnedError``;
``acquire()`` returns True or False). What differs, for safety:

- ``timeout=None`` (redis-py: the key never expires) holds the lock until it is
  released, renewed in the background on a :data:`UNTIMED_TTL` lease: a process that
  dies or hangs leaves it for at most that long, not forever. ``timeout=X`` is a lease
  of X seconds that is not renewed, as in redis-py.
- Waiting is woken by the release (``sleep`` is accepted and not needed), and waiters
  are served oldest first once one has waited long.
- The lock's key is ``name`` itself, as redis-py's (its owner value there; its token
  counter and queue under ``fencelock:{name}:``): a face's lock and a redis-py ``Lock``
  on one name exclude each other, so services can move over one process at a time. A
  face waiting on a redis-py holder is not woken by its release (redis-py publishes
  nothing): it looks again when the key's TTL ends, or every few seconds.
- ``token=`` is refused: fencelock picks each hold's owner value (20 random bytes) so
  that no two holders ever share one. ``local.token`` is that value; the fencing token
  the resource should check is :attr:`Lock.fencing_token`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from types import SimpleNamespace
from typing import Any, Literal

from fencelock.compat import needs_redis

try:
    from redis.exceptions import LockError, LockNotOwnedError
except ImportError as missing:  # a plain install
    raise needs_redis("fencelock.compat.redis_py is redis-py's Lock over fencelock") from missing

import fencelock
from fencelock.errors import AlreadyHeld, ConfigError, LeaseLost, LockTimeout
from fencelock.lease import AsyncLease, Lease, LeaseBase

logger = logging.getLogger(__name__)

# The lease of a lock taken with timeout=None, renewed while the lock is held.
UNTIMED_TTL = 30.0

_clients: weakref.WeakKeyDictionary[Any, fencelock.Client] = weakref.WeakKeyDictionary()
_clients_mutex = threading.Lock()


def client_of(redis: Any) -> fencelock.Client:
    """One fencelock client per redis-py client (bare keys: a lock at its name), made
    on first use, closed with it; the faces share it."""
    with _clients_mutex:
        client = _clients.get(redis)
        if client is None:
            client = _clients[redis] = fencelock.connect(redis, keys="bare")
            weakref.finalize(redis, client.close)
        return client


class _Hold(threading.local):
    """A hold, per thread (``thread_local=True``): nothing held in a thread that took none."""

    token: bytes | None = None  # the owner value at the lock's key
    lease: LeaseBase | None = None
    holder: object | None = None


class _Face:
    """What both variants of the face share: redis-py's settings, and the hold."""

    def __init__(
        self,
        redis: Any,
        name: str,
        timeout: float | None = None,
        sleep: float = 0.1,
        blocking: bool = True,
        blocking_timeout: float | None = None,
        thread_local: bool = True,
        raise_on_release_error: bool = True,
    ) -> None:
        self.redis, self.name = redis, name
        self.timeout, self.sleep = timeout, sleep
        self.blocking, self.blocking_timeout = blocking, blocking_timeout
        self.thread_local = bool(thread_local)
        self.raise_on_release_error = raise_on_release_error
        self.local: Any = _Hold() if self.thread_local else SimpleNamespace(token=None, lease=None)
        self._shared_holder = object()

    def _lease_terms(self) -> dict[str, Any]:
        """``timeout=None``: held until released (renewed); else a lease of ``timeout``."""
        if self.timeout is None:
            return {"ttl": UNTIMED_TTL, "renew": True}
        return {"ttl": self.timeout, "renew": False}

    def _holder(self) -> object:
        """Each Lock object contends on its own (per thread, if ``thread_local``), as
        two redis-py locks on one name do, even in one thread."""
        if not self.thread_local:
            return self._shared_holder
        mark = self.local.holder
        if mark is None:
            mark = self.local.holder = object()
        return mark

    def _wait(
        self, blocking: bool | None, blocking_timeout: float | None, token: object
    ) -> float | None:
        """How long an acquire may wait (0: one try; None: as long as it takes)."""
        if token is not None:
            raise ConfigError(
                f"lock {self.name!r}: token= is not supported; fencelock picks every "
                "hold's owner value (20 random bytes) so that no two holders share one"
            )
        if not (self.blocking if blocking is None else blocking):
            return 0.0
        return self.blocking_timeout if blocking_timeout is None else blocking_timeout

    def _took(self, lease: LeaseBase) -> bool:
        self.local.lease, self.local.token = lease, lease.owner.encode()
        return True

    def _held_for(self, what: str) -> Any:
        lease = self.local.lease
        if lease is None:
            raise LockError(f"Cannot {what} an unlocked lock", lock_name=self.name)
        if self.timeout is None:
            raise LockError(f"Cannot {what} a lock with no timeout", lock_name=self.name)
        return lease

    def _held(self) -> Any:
        lease = self.local.lease
        if lease is None:
            raise LockError(
                "Cannot release a lock that's not owned or is already unlocked.",
                lock_name=self.name,
            )
        return lease

    def _not_owned(self, what: str) -> LockNotOwnedError:
        return LockNotOwnedError(
            f"Cannot {what} a lock that's no longer owned", lock_name=self.name
        )

    def _is_owned(self) -> bool:
        lease: LeaseBase | None = self.local.lease
        return lease is not None and not lease.lost and not lease.released

    def _release_failed(self, error: LockError) -> None:
        if self.raise_on_release_error:
            raise error
        logger.warning("Lock was unlocked or no longer owned when exiting context manager.")

    @property
    def fencing_token(self) -> int | None:
        """The fencing token of the hold (None when not held): pass it to the resource,
        which refuses a write with a token older than one it has seen."""
        lease: LeaseBase | None = self.local.lease
        return None if lease is None else lease.token


class Lock(_Face):
    """redis-py's ``Lock`` over a fencelock lease (the module docstring says what differs)."""

    def __init__(self, redis: Any, name: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(redis, name, *args, **kwargs)
        self._lock = client_of(redis).lock(name, **self._lease_terms())

    def __enter__(self) -> Lock:
        if self.acquire():
            return self
        raise LockError("Unable to acquire lock within the time specified", lock_name=self.name)

    def __exit__(self, *exc_info: object) -> None:
        try:
            self.release()
        except LockError as exc:
            self._release_failed(exc)

    def acquire(
        self,
        sleep: float | None = None,
        blocking: bool | None = None,
        blocking_timeout: float | None = None,
        token: str | bytes | None = None,
    ) -> bool:
        """Take the lock: True once held; False if ``blocking`` is False and it is held,
        or if ``blocking_timeout`` seconds passed. ``sleep`` is not needed (a release
        wakes the waiter)."""
        wait = self._wait(blocking, blocking_timeout, token)
        try:
            return self._took(self._lock._acquire(wait, holder=self._holder()))
        except (LockTimeout, AlreadyHeld):  # AlreadyHeld: this very object holds it
            return False

    def locked(self) -> bool:
        """True if anyone holds the lock."""
        return self._lock.locked()

    def owned(self) -> bool:
        """True if this lock (this thread's hold, if ``thread_local``) holds it now."""
        return self._is_owned()

    def release(self) -> None:
        """Give the lock back; LockNotOwnedError if it was lost meanwhile."""
        lease: Lease = self._held()
        self.local.lease = self.local.token = None
        try:
            lease.release()
        except LeaseLost as exc:
            raise self._not_owned("release") from exc

    def extend(self, additional_time: float, replace_ttl: bool = False) -> Literal[True]:
        """Add ``additional_time`` seconds to the lock's time left (``replace_ttl``: make
        it the time left)."""
        lease: Lease = self._held_for("extend")
        return self._extend(lease, additional_time + (0 if replace_ttl else lease.remaining()))

    def reacquire(self) -> Literal[True]:
        """Reset the lock's time left to its ``timeout``."""
        lease: Lease = self._held_for("reacquire")
        return self._extend(lease, self.timeout or 0.0, "reacquire")

    def _extend(self, lease: Lease, ttl: float, what: str = "extend") -> Literal[True]:
        try:
            lease.extend(ttl)
        except LeaseLost as exc:
            raise self._not_owned(what) from exc
        return True


_aclients: weakref.WeakKeyDictionary[Any, asyncio.Future[fencelock.AsyncClient]] = (
    weakref.WeakKeyDictionary()
)


async def _aclient_of(redis: Any) -> fencelock.AsyncClient:
    """One connected fencelock asyncio client per redis.asyncio client."""
    opening = _aclients.get(redis)
    if (
        opening is None
        or opening.get_loop() is not asyncio.get_running_loop()  # closed with its loop
        or (opening.done() and opening.exception() is not None)
    ):
        opening = _aclients[redis] = asyncio.ensure_future(_opened(redis))
    return await asyncio.shield(opening)


async def _opened(redis: Any) -> fencelock.AsyncClient:
    client = await fencelock.aconnect(redis, keys="bare").__aenter__()
    closing = asyncio.ensure_future(_closed_with_the_loop(client))
    _closers.add(closing)
    closing.add_done_callback(_closers.discard)
    return client


# Each asyncio client's closer: a task that waits until it is cancelled, which
# ``asyncio.run()`` does to every task left as its loop ends.
_closers: set[asyncio.Future[None]] = set()


async def _closed_with_the_loop(client: fencelock.AsyncClient) -> None:
    """Close ``client`` as its event loop ends: its connections belong to that loop, and
    left to the garbage collector they stay open on the server until then (a program
    that runs ``asyncio.run()`` again and again opened one more each time)."""
    try:
        await asyncio.Event().wait()
    finally:
        await client.aclose()


class AsyncLock(_Face):
    """redis.asyncio's ``Lock`` over a fencelock lease: ``redis.lock(name,
    lock_class=AsyncLock)``; as :class:`Lock`."""

    _lock: fencelock.AsyncLock | None = None

    async def _fencelock_lock(self) -> fencelock.AsyncLock:
        if self._lock is None:
            client = await _aclient_of(self.redis)
            self._lock = client.lock(self.name, **self._lease_terms())
        return self._lock

    async def __aenter__(self) -> AsyncLock:
        if await self.acquire():
            return self
        raise LockError("Unable to acquire lock within the time specified", lock_name=self.name)

    async def __aexit__(self, *exc_info: object) -> None:
        try:
            await self.release()
        except LockError as exc:
            self._release_failed(exc)

    async def acquire(
        self,
        blocking: bool | None = None,
        blocking_timeout: float | None = None,
        token: str | bytes | None = None,
    ) -> bool:
        """As :meth:`Lock.acquire`."""
        wait = self._wait(blocking, blocking_timeout, token)
        lock = await self._fencelock_lock()
        try:
            return self._took(await lock._acquire(wait, holder=self._holder()))
        except (LockTimeout, AlreadyHeld):
            return False

    async def locked(self) -> bool:
        """True if anyone holds the lock."""
        return await (await self._fencelock_lock()).locked()

    async def owned(self) -> bool:
        """True if this lock (this thread's hold, if ``thread_local``) holds it now."""
        return self._is_owned()

    async def release(self) -> None:
        """Give the lock back; LockNotOwnedError if it was lost meanwhile. A release
        cancelled before it is done leaves the lock held, to be released again."""
        lease: AsyncLease = self._held()
        try:
            await lease.release()
        except LeaseLost as exc:
            self.local.lease = self.local.token = None
            raise self._not_owned("release") from exc
        self.local.lease = self.local.token = None

    async def extend(self, additional_time: float, replace_ttl: bool = False) -> Literal[True]:
        """As :meth:`Lock.extend`."""
        lease: AsyncLease = self._held_for("extend")
        ttl = additional_time + (0 if replace_ttl else lease.remaining())
        return await self._extend(lease, ttl)

    async def reacquire(self) -> Literal[True]:
        """As :meth:`Lock.reacquire`."""
        lease: AsyncLease = self._held_for("reacquire")
        return await self._extend(lease, self.timeout or 0.0, "reacquire")

    async def _extend(self, lease: AsyncLease, ttl: float, what: str = "extend") -> Literal[True]:
        try:
            await lease.extend(ttl)
        except LeaseLost as exc:
            raise self._not_owned(what) from exc
        return True
