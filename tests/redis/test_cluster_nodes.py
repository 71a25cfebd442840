"""fencelock's redis:// backend against the nodes of a real 3-master Redis Cluster.

``redis://`` speaks to one server and does not follow MOVED (``redis+cluster://`` does:
tests/redis/test_cluster.py). What it promises is that every key of one lock (the
lock, its token counter, its release channel) carries the ``{name}`` hash tag, so each
script touches a single slot and runs unchanged on the node that owns that slot. These
tests point fencelock at that node and show the scripts work there, that the same
script with untagged keys is refused with CROSSSLOT, and that the wrong node's MOVED is
one error naming where to go and ``redis+cluster://``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import redis
import redis.exceptions

import fencelock
from fencelock.backends.redis.scripts import LockKeys, lua
from fencelock.fencing import RedisGuard
from fencelock.testing import RedisServer, ServerPool
from tests.polling import wait_until
from tests.redis.conftest import Background, redis_cli

NAMES = ["orders/1", "orders/2", "orders/3", "payments/eu/7", "a", "x:y@z=1+2"]
# With the three even slot ranges of ``--cluster create`` these land on three nodes.
ONE_PER_NODE = ["orders/1", "orders/4", "orders/2"]
BUS_OFFSET = 10000  # a cluster node also listens on port + 10000 (the cluster bus)


@dataclass
class Cluster:
    nodes: list[RedisServer]

    def slot(self, key: str) -> int:
        return int(redis_cli(self.nodes[0].port, "cluster", "keyslot", key))

    def slot_owners(self) -> list[tuple[int, int, int]]:
        """(first slot, last slot, port of the master) for every slot range."""
        client: Any = redis.Redis(port=self.nodes[0].port, decode_responses=True)
        try:
            ranges = client.execute_command("CLUSTER", "SLOTS")
        finally:
            client.close()
        return [(int(first), int(last), int(master[1])) for first, last, master, *_ in ranges]

    def node_for(self, key: str) -> RedisServer:
        slot = self.slot(key)
        port = next(p for first, last, p in self.slot_owners() if first <= slot <= last)
        return next(n for n in self.nodes if n.port == port)

    def other_node(self, key: str) -> RedisServer:
        owner = self.node_for(key)
        return next(n for n in self.nodes if n is not owner)

    def logs(self) -> str:
        return "\n".join(f"--- {n.name} ---\n{n.log()}" for n in self.nodes)


@pytest.fixture(scope="module")
def cluster(module_servers: ServerPool) -> Cluster:
    """Three masters, no replicas, all 16384 slots assigned."""
    return Cluster(module_servers.redis_cluster(3, name="nodes"))


def test_every_key_of_a_lock_shares_one_slot(cluster: Cluster) -> None:
    for name in NAMES:
        keys = LockKeys.of(name)
        slots = {
            cluster.slot(key)
            for key in (
                keys.lock,
                keys.token,
                keys.channel,
                RedisGuard.fence_key(name),
                f"{{{name}}}:data",  # a guarded data key, tagged as RedisGuard.write says
            )
        }
        assert slots == {cluster.slot(name)}, (name, slots)
    owners = {cluster.node_for(LockKeys.of(name).lock).port for name in ONE_PER_NODE}
    assert len(owners) == 3  # so the next test exercises every node


@pytest.mark.parametrize("name", ONE_PER_NODE)
def test_acquire_renew_release_on_the_owning_node(cluster: Cluster, name: str) -> None:
    node = cluster.node_for(LockKeys.of(name).lock)
    with fencelock.connect(node.url) as client, fencelock.connect(node.url) as other:
        with client.lock(name, ttl=5) as first:
            with pytest.raises(fencelock.LockTimeout):
                other.lock(name, ttl=5).acquire(timeout=0)
            first.extend(10)  # renew.lua
            info = client.inspect(name)
            assert info is not None, info
            assert info.owner == first.owner, info
            assert info.remaining is not None
            assert info.remaining > 5
        with other.lock(name, ttl=5) as second:  # free.lua freed it
            assert second.token > first.token
    assert redis_cli(node.port, "exists", LockKeys.of(name).lock) == "0"


def test_a_release_wakes_a_waiter_on_the_owning_node(cluster: Cluster, slow_refresh: None) -> None:
    name = "orders/1"
    node = cluster.node_for(LockKeys.of(name).lock)
    with fencelock.connect(node.url) as holder, fencelock.connect(node.url) as waiter:
        lease = holder.lock(name, ttl=30).acquire(timeout=0)
        attempt = Background(lambda: waiter.lock(name, ttl=30).acquire(timeout=10))
        channel = waiter.internals.backend.listener.channel  # type: ignore[attr-defined]
        queue = LockKeys.of(name).queue
        wait_until(
            lambda: (
                redis_cli(node.port, "pubsub", "numsub", channel).split() == [channel, "1"]
                and redis_cli(node.port, "zcard", queue) == "1"
            ),
            timeout=5,
            what=lambda: f"the waiter subscribed and queued: {attempt.outcome()}",
        )
        assert not attempt.wait(0), attempt.outcome()  # subscribed, queued, still waiting
        lease.release()  # publishes the oldest waiter's owner on its client's channel
        # Unwoken, it would ask again only at its refresh (10 s here) or the TTL.
        assert attempt.wait(5), "waiter not woken by the release"
        assert attempt.value is not None, attempt.outcome()
        assert attempt.value.token > lease.token
        attempt.value.release()


def test_the_same_script_with_untagged_keys_is_refused_crossslot(cluster: Cluster) -> None:
    """The control: without the hash tag, the acquire script would not run at all."""
    untagged = ["fencelock:orders/1", "fencelock:orders/1:token"]
    assert cluster.slot(untagged[0]) != cluster.slot(untagged[1])
    client: Any = redis.Redis(port=cluster.node_for(untagged[0]).port, decode_responses=True)
    try:
        with pytest.raises(redis.exceptions.ResponseError) as caught:
            client.eval(lua("acquire"), 2, *untagged, "owner", 5000)
    finally:
        client.close()
    assert "hash to the same slot" in str(caught.value)  # CROSSSLOT


def test_redis_guard_on_the_owning_node(cluster: Cluster) -> None:
    name = "orders/1"
    node = cluster.node_for(RedisGuard.fence_key(name))
    guard = RedisGuard(node.url)
    try:
        guard.write(name, 5, f"{{{name}}}:data", "five")
        with pytest.raises(fencelock.StaleToken):
            guard.write(name, 4, f"{{{name}}}:data", "four")
        assert redis_cli(node.port, "get", f"{{{name}}}:data") == "five"
        # A data key in another slot cannot share the script: refused, not half-done.
        with pytest.raises(fencelock.BackendUnavailable, match="same slot"):
            guard.write(name, 6, "orders-1-data", "six")
        assert guard.last(name) == 5
    finally:
        guard.close()


def wrong_node_error(cluster: Cluster, name: str) -> tuple[RedisServer, RedisServer, Exception]:
    owner = cluster.node_for(LockKeys.of(name).lock)
    wrong = cluster.other_node(LockKeys.of(name).lock)
    with fencelock.connect(wrong.url) as client:  # PING works on any node
        try:
            client.lock(name, ttl=5).acquire(timeout=0)
        except Exception as exc:
            return owner, wrong, exc
    raise AssertionError(f"acquire of {name!r} on a node not owning its slot succeeded")


def test_the_wrong_node_raises_backend_unavailable(cluster: Cluster) -> None:
    owner, wrong, error = wrong_node_error(cluster, "orders/1")
    assert isinstance(error, fencelock.BackendUnavailable), repr(error)
    assert f"127.0.0.1:{wrong.port}" in str(error), str(error)
    assert isinstance(error.__cause__, redis.exceptions.ResponseError)  # MovedError
    assert redis_cli(owner.port, "exists", LockKeys.of("orders/1").lock) == "0"


def test_the_wrong_node_error_says_moved_and_where_to(cluster: Cluster) -> None:
    owner, _, error = wrong_node_error(cluster, "orders/1")
    message = str(error)
    assert "MOVED" in message, message
    assert "redis+cluster://" in message, message
    assert f"127.0.0.1:{owner.port}" in message, message
