"""``redis+cluster://`` on a real Redis Cluster: locks spread over the masters by slot, a
lease held while its slot is resharded to another master is kept, and a master's
failover keeps a lease or reports it lost, never holds it twice. The contract suite
runs on a cluster too (``redis-cluster``)."""

from __future__ import annotations

from typing import Any

import pytest
import redis

import fencelock
from fencelock.backends.redis.scripts import LockKeys
from fencelock.backends.redis.slots import SlotMap, slot_of
from fencelock.testing.pool import ServerPool
from fencelock.testing.redis import RedisServer
from tests.polling import wait_until
from tests.redis.conftest import kept_or_lost_never_twice


def _url(nodes: list[RedisServer]) -> str:
    return f"redis+cluster://{nodes[0].address}?timeout=1&connect_timeout=1"


def _map_of(node: RedisServer) -> SlotMap:
    client: Any = redis.Redis(port=node.port, decode_responses=True)
    try:
        return SlotMap.from_reply(client.execute_command("CLUSTER", "SLOTS"))
    finally:
        client.close()


def _node_id(node: RedisServer) -> str:
    return node.cli("CLUSTER", "MYID")


def _owner_of(nodes: list[RedisServer], slot: int) -> RedisServer:
    for node in nodes:
        for line in node.cli("CLUSTER", "NODES").splitlines():
            fields = line.split()
            if "myself" in fields[2] and "master" in fields[2]:
                for part in fields[8:]:
                    first, _, last = part.partition("-")
                    if part[0] != "[" and int(first) <= slot <= int(last or first):
                        return node
    raise AssertionError(f"no master serves slot {slot}")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("redis+cluster://", "takes one or more of the cluster's nodes"),
        ("redis+cluster://127.0.0.1:7000/3", "no database but 0"),
        ("redis+cluster://127.0.0.1:7000?nosuch=1", "nosuch"),
    ],
)
def test_bad_cluster_urls_say_what_is_wrong(url: str, message: str) -> None:
    with pytest.raises(fencelock.ConfigError, match=message):
        fencelock.connect(url)


def test_no_node_answering_is_one_clear_error() -> None:
    url = "redis+cluster://127.0.0.1:9,127.0.0.1:10?connect_timeout=0.5"
    with pytest.raises(fencelock.BackendUnavailable, match="no node of the Redis Cluster"):
        fencelock.connect(url)


def test_a_single_server_is_not_taken_for_a_cluster(servers: ServerPool) -> None:
    single = servers.redis(name="single")
    with pytest.raises(fencelock.ConfigError, match="not a Redis Cluster node"):
        fencelock.connect(f"redis+cluster://{single.address}")


def test_locks_live_on_the_master_serving_their_slot(servers: ServerPool, name: str) -> None:
    nodes = servers.redis_cluster(3)
    names = [f"{name}/{i}" for i in range(24)]
    with fencelock.connect(_url(nodes)) as client:
        leases = [client.lock(n).acquire() for n in names]
        used = set()
        for lease in leases:
            home = _owner_of(nodes, slot_of(lease.name))
            assert home.cli("GET", LockKeys.of(lease.name).lock) == lease.owner
            used.add(home.port)
        assert len(used) == 3  # 24 names reach every master
        assert [i.name for i in client.list(f"{name}/")] == sorted(names)
        for lease in leases:
            lease.release()
        assert client.list(f"{name}/") == []


def test_a_lease_is_kept_while_its_slot_moves_to_another_master(
    servers: ServerPool, name: str
) -> None:
    nodes = servers.redis_cluster(3)
    slot = slot_of(name)
    with fencelock.connect(_url(nodes)) as client, fencelock.connect(_url(nodes)) as other:
        lease = client.lock(name, ttl=30).acquire()
        source = _owner_of(nodes, slot)
        target = next(node for node in nodes if node is not source)
        target.cli("CLUSTER", "SETSLOT", str(slot), "IMPORTING", _node_id(source))
        source.cli("CLUSTER", "SETSLOT", str(slot), "MIGRATING", _node_id(target))
        keys = source.cli("CLUSTER", "GETKEYSINSLOT", str(slot), "100").split()
        moved = source.cli("MIGRATE", "127.0.0.1", str(target.port), "", "0", "5000", "KEYS", *keys)
        assert moved == "OK"
        for node in nodes:
            node.cli("CLUSTER", "SETSLOT", str(slot), "NODE", _node_id(target))
        # Both clients still route the slot to the old master: each learns the move
        # from its MOVED reply and goes on, on the new one.
        lease.extend(30)
        with pytest.raises(fencelock.LockTimeout):
            other.lock(name).acquire(timeout=0.3)
        assert not lease.lost
        lease.release()
        after = other.lock(name).acquire(timeout=5)
        assert after.token > lease.token
        assert target.cli("GET", LockKeys.of(name).lock) == after.owner
        after.release()


def test_a_failover_keeps_the_lease_or_reports_it_lost(servers: ServerPool, name: str) -> None:
    nodes = servers.redis_cluster(3, replicas=1)
    with fencelock.connect(_url(nodes)) as client, fencelock.connect(_url(nodes)) as other:
        lease = client.lock(name, ttl=3).acquire()
        master = _owner_of(nodes, slot_of(name))
        master.kill()
        dead = ("127.0.0.1", master.port)
        survivors = [node for node in nodes if node is not master]
        # A replica takes the slot over once the master is 1 s silent; until every node
        # says so, an acquire may still be sent to the dead master (and raise).
        wait_until(
            lambda: all(
                _map_of(node).master_for(slot_of(name)) not in (None, dead) for node in survivors
            ),
            what="a replica to take the slot over",
            interval=0.2,
        )
        kept_or_lost_never_twice(lease, other)


def test_many_leases_renew_in_one_pipeline_a_master_even_after_a_script_flush(
    servers: ServerPool, name: str
) -> None:
    nodes = servers.redis_cluster(3)
    with fencelock.connect(_url(nodes)) as client:
        leases = [client.lock(f"{name}/{i}", ttl=30).acquire() for i in range(24)]
        stranger = client.lock(f"{name}/x", ttl=30).acquire()
        stranger.release()
        for node in nodes:
            assert (
                node.cli("SCRIPT", "FLUSH") == "OK"
            )  # NOSCRIPT in the pipeline: loaded, sent again
        cluster: Any = client.internals.backend
        renewals = [(lease.name, lease.owner, 60.0) for lease in leases]
        renewals.append((stranger.name, stranger.owner, 60.0))  # released: not renewed
        assert cluster.renew_many(renewals) == [True] * 24 + [False]
        for lease in leases:
            home = _owner_of(nodes, slot_of(lease.name))
            assert int(home.cli("PTTL", LockKeys.of(lease.name).lock)) > 30_000
            lease.release()
