"""python-redis-lock's ``Lock``, over fencelock: ``Lock(redis_client, name, expire=60,
auto_renewal=True)``, with a fencing token on every hold.

The signature, return values and errors are python-redis-lock's (its own exception
classes when it is installed, classes of the same names otherwise). What differs, for
safety:

- ``expire=None`` (python-redis-lock: the key never expires) holds the lock until it is
  released, renewed in the background on a :data:`UNTIMED_TTL` lease: a process that
  dies leaves it for at most that long, not forever. ``expire=X`` is a lease of X
  seconds, renewed if ``auto_renewal``.
- The lock's key is python-redis-lock's, ``lock:NAME``, so a face and python-redis-lock
  on one name exclude each other while a service moves over; a face's release also
  pushes ``lock-signal:NAME`` as python-redis-lock's does, which wakes its waiters. A
  face waiting on a python-redis-lock holder looks again when the key's TTL ends, or
  every few seconds.
- ``id=`` is refused: fencelock picks each hold's owner value (20 random bytes).
  ``lock.id`` is that value while held; the fencing token the resource should check is
  :attr:`Lock.fencing_token`.
"""

from __future__ import annotations

import importlib
import weakref
from typing import Any

from fencelock.compat.redis_py import UNTIMED_TTL, client_of
from fencelock.errors import AlreadyHeld, ConfigError, LeaseLost, LockTimeout
from fencelock.lease import Lease

_EXCEPTIONS = (
    "AlreadyAcquired",
    "NotAcquired",
    "AlreadyStarted",
    "TimeoutNotUsable",
    "InvalidTimeout",
    "TimeoutTooLarge",
    "NotExpirable",
)


def _exceptions() -> tuple[type[RuntimeError], ...]:
    """python-redis-lock's exception classes, else classes of the same names: where it is
    not installed, or where ``redis_lock`` is a module of the user's that re-exports this
    face (``from fencelock.compat.redis_lock import *``: it is being imported right now,
    and has none of them yet)."""
    try:
        redis_lock: Any = importlib.import_module("redis_lock")
        return tuple(getattr(redis_lock, name) for name in _EXCEPTIONS)
    except (ImportError, AttributeError):
        return tuple(type(name, (RuntimeError,), {"__module__": __name__}) for name in _EXCEPTIONS)


(
    AlreadyAcquired,
    NotAcquired,
    AlreadyStarted,
    TimeoutNotUsable,
    InvalidTimeout,
    TimeoutTooLarge,
    NotExpirable,
) = _exceptions()


def _is_strict_redis(client: Any) -> bool:
    """python-redis-lock's ``strict`` check: a redis-py client (``StrictRedis`` is
    ``Redis`` since redis-py 3)."""
    redis: Any = importlib.import_module("redis")
    return isinstance(client, redis.StrictRedis)


class Lock:
    """python-redis-lock's ``Lock`` over a fencelock lease (the module docstring says
    what differs)."""

    def __init__(
        self,
        redis_client: Any,
        name: str,
        expire: float | None = None,
        id: str | bytes | None = None,  # python-redis-lock's name for it
        auto_renewal: bool = False,
        strict: bool = True,
        signal_expire: int = 1000,
        blocking: bool = True,
    ) -> None:
        if strict and not _is_strict_redis(redis_client):
            raise ValueError(
                "redis_client must be instance of StrictRedis. "
                "Use strict=False if you know what you're doing."
            )
        if auto_renewal and expire is None:
            raise ValueError("Expire may not be None when auto_renewal is set")
        if expire:
            expire = int(expire)  # python-redis-lock's order: '-1' is -1, 'x' a ValueError
        if expire is not None and expire < 0:
            raise ValueError("A negative expire is not acceptable.")
        if id is not None:
            raise ConfigError(
                f"lock {name!r}: id= is not supported; fencelock picks every hold's owner "
                "value (20 random bytes) so that no two holders share one"
            )
        self._client = redis_client
        self._expire = int(expire) if expire else None
        self._auto_renewal = auto_renewal
        self._signal_expire = signal_expire
        self._name, self._signal = f"lock:{name}", f"lock-signal:{name}"
        self.blocking = blocking
        if self._expire is None:
            terms: dict[str, Any] = {"ttl": UNTIMED_TTL, "renew": True}
        else:
            terms = {"ttl": self._expire, "renew": auto_renewal}
        self._lock = client_of(redis_client).lock(self._name, **terms)
        self._lease: Lease | None = None
        self._holder = object()  # each Lock object contends on its own

    @property
    def id(self) -> str | None:
        """The owner value of this object's hold (None when it holds nothing)."""
        return None if self._lease is None else self._lease.owner

    @property
    def fencing_token(self) -> int | None:
        """The fencing token of this object's hold (None when it holds nothing)."""
        return None if self._lease is None else self._lease.token

    def get_owner_id(self) -> str | None:
        """The owner value at the lock's key, whoever holds it."""
        owner = self._client.get(self._name)
        return owner.decode("ascii", "replace") if isinstance(owner, bytes) else owner

    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """Take the lock: True once held; False if ``blocking`` is False and it is held,
        or after ``timeout`` seconds."""
        if self._lease is not None and not self._lease.lost and not self._lease.released:
            raise AlreadyAcquired("Already acquired from this Lock instance.")
        if not blocking and timeout is not None:
            raise TimeoutNotUsable("Timeout cannot be used if blocking=False")
        if timeout:
            timeout = int(timeout)
            if timeout < 0:
                raise InvalidTimeout(f"Timeout ({timeout}) cannot be less than or equal to 0")
            if self._expire and not self._auto_renewal and timeout > self._expire:
                raise TimeoutTooLarge(
                    f"Timeout ({timeout}) cannot be greater than expire ({self._expire})"
                )
        try:
            self._lease = self._lock._acquire(0 if not blocking else timeout, self._holder)
        except (LockTimeout, AlreadyHeld):
            return False
        # As python-redis-lock's: a Lock collected while held is renewed no more, and its
        # key ends by its expire (the renewer holds the lease, not this object).
        weakref.finalize(self, _stop_renewing, self._lease)
        return True

    def extend(self, expire: float | None = None) -> None:
        """Set the lock's time left to ``expire`` seconds (default: its own)."""
        if expire:
            expire = int(expire)
            if expire < 0:
                raise ValueError("A negative expire is not acceptable.")
        elif self._expire is not None:
            expire = self._expire
        else:
            raise TypeError(
                "To extend a lock 'expire' must be provided as an argument to extend() "
                "method or at initialization time."
            )
        lease = self._lease
        if lease is None or lease.released:
            raise NotAcquired(f"Lock {self._name} is not acquired or it already expired.")
        if self._expire is None:
            raise NotExpirable(f"Lock {self._name} has no assigned expiration time")
        try:
            lease.extend(expire)
        except LeaseLost as exc:
            raise NotAcquired(f"Lock {self._name} is not acquired or it already expired.") from exc

    def release(self) -> None:
        """Give the lock back, and wake python-redis-lock's waiters too."""
        lease, self._lease = self._lease, None
        if lease is None or lease.released:
            raise NotAcquired(f"Lock({self._name}) is not acquired or it already expired.")
        try:
            lease.release()
        except LeaseLost as exc:
            raise NotAcquired(f"Lock({self._name}) is not acquired or it already expired.") from exc
        finally:
            self._signal_waiters()

    def _signal_waiters(self) -> None:
        pipe = self._client.pipeline()
        pipe.delete(self._signal)
        pipe.lpush(self._signal, 1)
        pipe.pexpire(self._signal, self._signal_expire)
        pipe.execute()

    def locked(self) -> bool:
        """True if anyone holds the lock."""
        return self._lock.locked()

    def reset(self) -> None:
        """End whoever holds the lock now (use with care)."""
        client_of(self._client).evict(self._name)
        self._signal_waiters()

    def __enter__(self) -> Lock:
        if not self.acquire(blocking=self.blocking):
            raise NotAcquired(f"Lock({self._name}) is not acquired or it already expired.")
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def _stop_renewing(lease: Lease) -> None:
    """Called when a face is collected: a flag the renewer reads, no lock taken here."""
    lease.renews = False


def reset_all(redis_client: Any) -> None:
    """End every lock on ``redis_client``'s server, a face's or python-redis-lock's, and
    wake their waiters (python-redis-lock's ``reset_all``; use with care)."""
    client = client_of(redis_client)
    faces = client.list("lock:")
    names = {info.name.removeprefix("lock:") for info in faces}
    for info in faces:
        client.evict(info.name)
    for key in redis_client.scan_iter(match="lock:*"):  # python-redis-lock's own holders'
        text = key.decode() if isinstance(key, bytes) else str(key)
        names.add(text.removeprefix("lock:"))
        redis_client.delete(text)
    for name in names:
        signal = f"lock-signal:{name}"
        redis_client.delete(signal)
        redis_client.lpush(signal, 1)
        redis_client.pexpire(signal, 1000)
