"""The backend contract: one small protocol, in a sync and an asyncio colour.

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
  :class:`~fencelock.engine.session.Session` the lease is held in; the backend
  reports through it a suspension (at risk) or the end (lost) to all its leases at
  once. ``renew`` may answer :class:`RenewedAsOf` (the time of the session's
  keepalive that covers the lease) instead of sending a request per lease, so a
  thousand leases cost one keepalive per third of their TTL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from fencelock.engine.outcomes import Acquired, AttemptResult, Busy, RenewedAsOf

__all__ = [
    "Acquired",
    "AsyncAttempt",
    "AsyncBackend",
    "Attempt",
    "AttemptResult",
    "Backend",
    "Busy",
    "LockInfo",
    "RenewedAsOf",
]


@dataclass(frozen=True)
class LockInfo:
    """What a backend knows about one lock name."""

    name: str
    owner: str | None
    token: int
    remaining: float | None
    waiters: int | None = None

    @property
    def held(self) -> bool:
        """Whether an owner holds the lock now (its lease has not expired)."""
        return self.owner is not None


class Attempt(Protocol):
    def try_acquire(self) -> AttemptResult:
        """Take the lease if free, issuing its token in the same atomic step."""

    def wait(self, timeout: float) -> None:
        """Return when the lease may have become free, or after ``timeout`` seconds."""

    def close(self) -> None:
        """Forget this attempt: remove its queue entry or waiter registration."""


class Backend(Protocol):
    url: str
    supports_fair: bool

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

    def close(self) -> None: ...


class AsyncAttempt(Protocol):
    async def try_acquire(self) -> AttemptResult: ...

    async def wait(self, timeout: float) -> None: ...

    async def close(self) -> None: ...


class AsyncBackend(Protocol):
    url: str
    supports_fair: bool

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

    async def close(self) -> None: ...
