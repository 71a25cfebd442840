"""``redis+cluster://``: leases on a Redis Cluster, each lock on the master serving its slot.

A lock's keys share one slot (:mod:`.slots`), so each lock is a ``redis://`` lock on
one master, run by a :class:`~.sync_backend.RedisBackend` of that master (made on first
use: its own script connections and wake-up listener; a release's ``PUBLISH`` reaches
every node of a cluster, so the waiter's listener hears it). This module only routes:
it learns the slot map from ``CLUSTER SLOTS`` (asking the URL's nodes, then the masters
it knows) and sends each call to the master that serves the lock's slot.

- **MOVED** (the slot has moved, by a resharding or a failover): nothing was done on the
  old node, so the call is made once more, at the node the reply names, after learning
  the map anew.
- **A node that does not answer** (a master failing over): the call raises
  :class:`BackendUnavailable` as on ``redis://`` (the renewer retries; an acquire that
  may have been taken is given back by the node's own undo), and the next call learns
  the map anew first, so it reaches the replica promoted in its place. What a promoted
  replica knows of a lease is what ``redis+sentinel://`` knows (docs/backends.md).
- **ASK / TRYAGAIN** (a slot in the middle of moving): :class:`BackendUnavailable`.

asyncio runs it through the thread adapter (:mod:`fencelock.backends.threaded`): the
routing is written once.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import redis

from fencelock import clock, forking
from fencelock.backends.base import (
    Acquired,
    Attempt,
    AttemptResult,
    Capabilities,
    LockInfo,
    Renewal,
    RenewOutcome,
)
from fencelock.backends.redis.errors import DRIVER_ERRORS, SlotMoved, translate
from fencelock.backends.redis.options import RedisOptions, cluster_seeds, redis_options
from fencelock.backends.redis.slots import Address, SlotMap, slot_of
from fencelock.backends.redis.sync_backend import RedisBackend
from fencelock.engine.urls import ParsedURL
from fencelock.errors import BackendUnavailable, ConfigError, FencelockError
from fencelock.holder import new_identity

T = TypeVar("T")

# After a node failed to answer, the map is learnt anew before the next call, but not
# more often than this: a cluster in the middle of a failover is not asked in a loop.
RELEARN_AT_MOST_EVERY = 0.2


class RedisClusterBackend:
    """Leases on a Redis Cluster (sync; asyncio through the thread adapter)."""

    capabilities = Capabilities(
        fair=True,
        renews_in_batches=True,  # a pipeline per master
    )

    def outlives_client(self, renewed: bool) -> bool:
        return True

    def __init__(self, parsed: ParsedURL) -> None:
        self.url = parsed.redacted
        self.request_bound = parsed.request_bound
        self._parsed = parsed
        self._seeds = cluster_seeds(parsed)
        self._nodes: dict[Address, RedisBackend] = {}
        self._made = threading.Lock()  # a node's backend is made once
        self._stale = False
        self._learnt_at = 0.0
        self._map = SlotMap((), ())
        self._map = self._learn()
        forking.register(self)

    def _reset_after_fork(self) -> None:
        """In a forked child: a parent's thread may have held the lock (the nodes' own
        backends make their connections anew themselves)."""
        self._made = threading.Lock()

    def _options(self, address: Address) -> RedisOptions:
        return redis_options(self._parsed, host=address)

    # -- the slot map ----------------------------------------------------------------

    def _learn(self) -> SlotMap:
        """The slot map, from the first node that answers: the URL's, then the masters
        known (a cluster whose seeds all failed over is still found)."""
        failures: list[str] = []
        for address in dict.fromkeys([*self._seeds, *self._map.masters]):
            options = self._options(address)
            try:
                reply = _cluster_slots(options)
            except DRIVER_ERRORS as exc:
                if "cluster support disabled" in str(exc):
                    raise ConfigError(
                        f"{options.where} is not a Redis Cluster node (cluster support "
                        f"disabled); use redis:// for a single server ({self.url})"
                    ) from exc
                failures.append(str(translate(exc, options.where, options.tls)))
                continue
            self._learnt_at, self._stale = clock.now(), False
            return SlotMap.from_reply(reply)
        raise BackendUnavailable(
            f"no node of the Redis Cluster answered ({self.url}): " + "; ".join(failures)
        )

    def relearn(self) -> None:
        """Learn the slot map anew (after MOVED)."""
        self._map = self._learn()

    def _relearn_if_stale(self) -> None:
        if self._stale and clock.now() - self._learnt_at >= RELEARN_AT_MOST_EVERY:
            try:
                self.relearn()
            except BackendUnavailable:
                self._learnt_at = clock.now()  # keep the old map; try again later

    def address_for(self, name: str) -> Address:
        """The master serving lock ``name``'s slot now."""
        self._relearn_if_stale()
        slot = slot_of(name)
        address = self._map.master_for(slot)
        if address is None:
            self.relearn()
            address = self._map.master_for(slot)
        if address is None:
            raise BackendUnavailable(
                f"no master of the Redis Cluster serves slot {slot} (lock {name!r}) "
                f"now ({self.url}): the cluster is down there"
            )
        return address

    def _node(self, address: Address) -> RedisBackend:
        node = self._nodes.get(address)
        if node is None:
            with self._made:
                node = self._nodes.get(address)
                if node is None:
                    node = RedisBackend(self._parsed, self._options(address))
                    self._nodes[address] = node
        return node

    def routed(self, name: str, call: Callable[[Address, RedisBackend], T]) -> T:
        """``call`` on the master serving ``name``; once more where a MOVED points (the
        first was not carried out), or on the master promoted in the place of one that
        did not answer (the map learnt anew at once, at most every RELEARN_AT_MOST_EVERY)."""
        address = self.address_for(name)
        try:
            return call(address, self._node(address))
        except SlotMoved:
            self.relearn()
        except BackendUnavailable:
            self._stale = True
            self._relearn_if_stale()
            if self._map.master_for(slot_of(name)) in (None, address):
                raise
        address = self.address_for(name)
        return call(address, self._node(address))

    # -- the backend contract ------------------------------------------------------

    def attempt(
        self, name: str, owner: str, ttl: float, fair: bool = False, renewed: bool = True
    ) -> ClusterAttempt:
        return ClusterAttempt(self, name, owner, ttl, fair)

    def release(self, name: str, owner: str) -> bool:
        return self.routed(name, lambda _, node: node.release(name, owner))

    def renew(self, name: str, owner: str, ttl: float) -> bool:
        return self.routed(name, lambda _, node: node.renew(name, owner, ttl))

    def renew_many(self, renewals: Sequence[Renewal]) -> list[RenewOutcome]:
        """Each master's leases in one pipeline of single-key scripts (a script of many
        keys would span slots); one that moved, or whose master did not answer, is
        renewed on its own, routed as any call (its error is its outcome)."""
        by_master: dict[Address, list[int]] = {}
        for i, (name, _, _) in enumerate(renewals):
            by_master.setdefault(self.address_for(name), []).append(i)
        outcomes: list[RenewOutcome | None] = [None] * len(renewals)
        for address, indices in by_master.items():
            try:
                replies = self._node(address).renew_pipelined([renewals[i] for i in indices])
            except BackendUnavailable:
                self._stale = True
                continue
            for i, reply in zip(indices, replies, strict=True):
                outcomes[i] = None if isinstance(reply, FencelockError) else reply
        return [
            outcome if outcome is not None else self._renew_alone(*renewals[i])
            for i, outcome in enumerate(outcomes)
        ]

    def _renew_alone(self, name: str, owner: str, ttl: float) -> RenewOutcome:
        try:
            return self.renew(name, owner, ttl)
        except FencelockError as exc:
            return exc

    def inspect(self, name: str) -> LockInfo | None:
        return self.routed(name, lambda _, node: node.inspect(name))

    def list(self, prefix: str) -> list[LockInfo]:
        """Every master's held locks under ``prefix`` (a master that does not answer
        fails the listing: a partial one would hide leases)."""
        self._relearn_if_stale()
        found: list[LockInfo] = []
        for address in self._map.masters:
            try:
                found += self._node(address).list(prefix)
            except BackendUnavailable:
                self._stale = True
                raise
        return sorted(found, key=lambda info: info.name)

    def waiters(self, name: str) -> builtins.list[str]:
        return self.routed(name, lambda _, node: node.waiters(name))

    def close(self) -> None:
        nodes, self._nodes = list(self._nodes.values()), {}
        for node in nodes:
            node.close()


class ClusterAttempt:
    """An acquisition on the master serving the lock's slot; made again on the master
    that serves it when a ``MOVED`` says the slot has moved. The attempt on a new master
    stores a fresh owner: the old master's undo (of a try it may still run) names the old
    one, so it can never delete a grant, should the slot come back to that master."""

    def __init__(
        self, cluster: RedisClusterBackend, name: str, owner: str, ttl: float, fair: bool
    ) -> None:
        self._cluster, self._name, self._owner = cluster, name, owner
        self._ttl, self._fair = ttl, fair
        self._inner: Attempt | None = None
        self._inner_owner = owner
        self._address: Address | None = None  # the master self._inner was made on

    def try_acquire(self) -> AttemptResult:
        return self._cluster.routed(self._name, self._try_on)

    def _try_on(self, address: Address, node: RedisBackend) -> AttemptResult:
        if self._inner is None or address != self._address:
            if self._address is not None:
                self._inner_owner = new_identity(self._owner)
            self.close()  # what the old master may hold of it is given back by its undo
            self._inner = node.attempt(self._name, self._inner_owner, self._ttl, self._fair)
            self._address = address
        result = self._inner.try_acquire()
        moved = self._inner_owner != self._owner
        if moved and isinstance(result, Acquired) and result.owner is None:
            return replace(result, owner=self._inner_owner)
        return result

    def wait(self, timeout: float) -> None:
        if self._inner is not None:
            self._inner.wait(timeout)

    def interrupt(self) -> None:
        inner = self._inner
        if inner is not None:
            inner.interrupt()

    def close(self) -> None:
        inner, self._inner = self._inner, None
        if inner is not None:
            inner.close()


def _cluster_slots(options: RedisOptions) -> Any:
    """``CLUSTER SLOTS`` from one node, on a connection of its own."""
    client = redis.Redis(**options.client_kwargs())
    try:
        return client.execute_command("CLUSTER", "SLOTS")  # type: ignore[no-untyped-call]
    finally:
        client.close()
