"""An etcd lease shared by many fencelock leases: granted once, kept alive once for all.

The keepalive is lazy: whoever needs the session fresh (an acquire, a waiter, the
renewer renewing any of its leases) sends one, unless one sent recently enough
answered, and callers at the same time share one request. Its outcome is pushed
into every lease held in the session (:class:`fencelock.engine.session.SharedSession`).
"""

from __future__ import annotations

import asyncio
import math

from fencelock import blocking_call, clock
from fencelock.aio import read_when_done
from fencelock.backends.etcd import gateway
from fencelock.backends.etcd.http import Gateway
from fencelock.engine.session import SharedSession
from fencelock.errors import BackendUnavailable, FencelockError

# A keepalive answered this long ago (as a fraction of the TTL) is fresh enough.
FRESH_FRACTION = 1 / 3
# A member that leaves a keepalive or a listing unanswered this long (a fraction of the
# TTL, at least MIN_PATIENCE) is passed over for the next: a paused member in use would
# otherwise hold the renewal past the lease's safe time (10 s, the request timeout).
PATIENCE_FRACTION = 1 / 6
MIN_PATIENCE = 0.25


class SessionEnded(BackendUnavailable):
    """The etcd lease expired or was revoked: nothing held in it is held any more.

    A :class:`BackendUnavailable` (documented): an acquire re-queues on a new session
    and raises it only if leases keep ending as they are granted."""


class EtcdSession:
    """One etcd lease (``lease_id``) of ``ttl`` whole seconds (as granted: etcd raises a
    TTL to its minimum, 2 s with default election timing), as this client keeps it."""

    def __init__(self, gateway_: Gateway, lease_id: int, ttl: int, granted_at: float) -> None:
        self._gateway = gateway_
        self.lease_id, self.ttl = lease_id, ttl
        self.confirmed_at = granted_at  # when the last answered grant/keepalive was sent
        self.news = SharedSession(f"etcd lease {lease_id:x}")
        self._keepalive: asyncio.Task[float] | None = None
        self._keys: frozenset[bytes] = frozenset()
        self._keys_read_at = -math.inf  # when the request that listed them was sent
        self._listing: asyncio.Task[None] | None = None

    @classmethod
    async def grant(cls, gateway_: Gateway, ttl: int) -> EtcdSession:
        sent = clock.now()
        reply = await gateway_.call("lease/grant", {"TTL": str(ttl)})
        granted = gateway.integer(reply, "TTL")
        if granted < ttl:  # never seen: the server grants at least its minimum TTL
            raise SessionEnded(f"etcd granted a lease of {granted}s for {ttl}s asked")
        return cls(gateway_, gateway.integer(reply, "ID"), granted, sent)

    @property
    def ended(self) -> bool:
        return self.news.ended_because is not None

    def trusted_until(self) -> float:
        """The client's view of when the server lets the lease expire at the earliest."""
        return -math.inf if self.ended else self.confirmed_at + self.ttl

    async def fresh(self, max_age: float | None = None) -> float:
        """When a keepalive that answered was sent, not longer ago than ``max_age``
        (default: a third of the TTL); sends one if needed. Raises
        :class:`SessionEnded`, or a fencelock error if etcd could not be reached."""
        limit = self.ttl * FRESH_FRACTION if max_age is None else max_age
        asked = clock.now()
        while True:
            if self.ended:
                raise SessionEnded(str(self.news.ended_because))
            if asked - self.confirmed_at <= limit:
                return self.confirmed_at
            if self._keepalive is None or self._keepalive.done():
                self._keepalive = read_when_done(
                    (await blocking_call.running_loop()).create_task(self._send_keepalive())
                )
            await asyncio.shield(self._keepalive)

    async def holds(self, key: bytes, max_age: float) -> bool:
        """Whether ``key`` is still attached to this lease, as a listing of all its keys
        sent at most ``max_age`` ago says: one request per session, not per key."""
        asked = clock.now()
        while asked - self._keys_read_at > max_age:
            if self._listing is None or self._listing.done():
                self._listing = read_when_done(
                    (await blocking_call.running_loop()).create_task(self._list_keys())
                )
            await asyncio.shield(self._listing)
        return key in self._keys

    async def _list_keys(self) -> None:
        sent = clock.now()
        reply = await self._gateway.call(
            "lease/timetolive", {"ID": str(self.lease_id), "keys": True}, self._patience()
        )
        self._keys = frozenset(gateway.unb64(key) for key in reply.get("keys", []))
        self._keys_read_at = sent

    async def _send_keepalive(self) -> float:
        sent = clock.now()
        try:
            reply = await self._gateway.call(
                "lease/keepalive", {"ID": str(self.lease_id)}, self._patience()
            )
        except FencelockError as exc:
            self.news.suspend(f"etcd keepalive of lease {self.lease_id:x} failed: {exc}")
            raise
        if gateway.integer(reply, "TTL") <= 0:  # etcd's way of saying: no such lease
            self.end("expired or was revoked on the server")
            raise SessionEnded(str(self.news.ended_because))
        self.confirmed_at = max(self.confirmed_at, sent)
        return sent

    def _patience(self) -> float:
        return max(self.ttl * PATIENCE_FRACTION, MIN_PATIENCE)

    def end(self, why: str) -> None:
        self.news.end(f"etcd lease {self.lease_id:x} {why}")

    async def revoke(self, why: str | None = "was revoked as its client closed") -> None:
        """Give the lease up: its keys go at once; ``why`` goes to its leases (None:
        they moved to another session and hear nothing)."""
        if why is not None:
            self.end(why)
        await self._gateway.call("lease/revoke", {"ID": str(self.lease_id)})
