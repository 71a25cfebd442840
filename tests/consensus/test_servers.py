"""The throwaway etcd cluster and ZooKeeper ensemble the etcd and ZooKeeper backends will
be tested on: three loopback members each, started together, surviving a member's loss."""

from __future__ import annotations

import base64
import json
import urllib.request
from collections.abc import Iterator

import pytest

from fencelock.testing import (
    KINDS,
    EtcdServer,
    ServerPool,
    ServerProcess,
    ServerStartError,
    ZooKeeperServer,
)
from tests.polling import wait_until

SETTLE = 30.0  # seconds a cluster may take to elect a new leader


def etcd_call(member: EtcdServer, path: str, body: dict[str, object]) -> dict[str, object]:
    request = urllib.request.Request(
        f"http://{member.address}/v3/{path}", data=json.dumps(body).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=5) as reply:  # noqa: S310 (an http URL built here)
        answer: dict[str, object] = json.load(reply)
        return answer


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def leader_of(member: EtcdServer) -> str:
    return str(etcd_call(member, "maintenance/status", {})["leader"])


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerPool]:
    with ServerPool(tmp_path_factory.mktemp) as servers:
        yield servers


def test_an_etcd_cluster_of_three_agrees_replicates_and_survives_its_leader(
    pool: ServerPool,
) -> None:
    members = pool.etcd(3)
    assert len({leader_of(m) for m in members}) == 1
    etcd_call(members[0], "kv/put", {"key": b64("k"), "value": b64("v")})
    kvs = etcd_call(members[2], "kv/range", {"key": b64("k")})["kvs"]
    assert [base64.b64decode(kv["value"]).decode() for kv in kvs] == ["v"]  # type: ignore[attr-defined]
    assert members[0].url.startswith("etcd://127.0.0.1:")
    assert members[0].url.count(",") == 2
    leader_id = leader_of(members[0])
    leader = next(
        m
        for m in members
        if str(etcd_call(m, "maintenance/status", {})["header"]["member_id"]) == leader_id  # type: ignore[index]
    )
    leader.kill()
    rest = [m for m in members if m is not leader]
    wait_until(
        lambda: all(m.ready() for m in rest),
        what="the other two to elect a leader",
        timeout=SETTLE,
        interval=0.1,
    )
    leader.start()  # back, on the same ports and data
    assert leader.ready()


def test_a_zookeeper_ensemble_of_three_has_one_leader_and_survives_it(pool: ServerPool) -> None:
    members = pool.zookeeper(3)
    modes = sorted(m.mode() or "" for m in members)
    assert modes == ["follower", "follower", "leader"], modes
    leader = next(m for m in members if m.mode() == "leader")
    leader.kill()
    rest = [m for m in members if m is not leader]
    wait_until(
        lambda: sorted(m.mode() or "" for m in rest) == ["follower", "leader"],
        what="the other two to elect a leader",
        timeout=SETTLE,
        interval=0.1,
    )
    leader.start(timeout=SETTLE)
    assert leader.mode() == "follower"


def test_a_standalone_zookeeper(pool: ServerPool) -> None:
    (member,) = pool.zookeeper(1, name="zk-alone")
    assert member.mode() == "standalone"
    assert member.url == f"zookeeper://{member.address}"


@pytest.mark.parametrize("kind", ["redis", "etcd", "zookeeper"])
def test_a_server_whose_port_another_holds_is_not_taken_for_ready(
    pool: ServerPool, kind: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Readiness asks the server on the port who it is: another live server on that port
    (a port reused meanwhile) must not pass for the one just started."""
    cls = KINDS[kind]
    first: ServerProcess
    if kind == "redis":
        first = pool.redis(name="first-redis")
    elif kind == "etcd":
        (first,) = pool.cluster([EtcdServer(tmp_path_factory.mktemp(kind), name="first-etcd")])
    else:
        where = tmp_path_factory.mktemp(kind)
        (first,) = pool.cluster([ZooKeeperServer(where, name="first-zookeeper")])
    clash = cls(tmp_path_factory.mktemp("clash"), name=f"clash-{kind}", port=first.port)
    with pytest.raises(ServerStartError, match=f"clash-{kind} exited at start"):
        pool.add(clash)
    assert first.ready()
