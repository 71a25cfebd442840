"""etcd:// and zookeeper:// under failures, on a 3-member cluster each, by one set of
tests: a holder killed with SIGKILL frees the lock by its TTL (its session), the next
token is higher, and killing the leader loses no lease (TTL 10). The faults only one of
them has words for are in test_etcd_failures.py."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import pytest

import fencelock
from fencelock.testing import EtcdServer, ServerPool, ZooKeeperServer
from fencelock.testing.process import ServerProcess
from tests.consensus.test_servers import SETTLE, etcd_call
from tests.polling import wait_until

HOLDER = """
import sys, time, fencelock
client = fencelock.connect(sys.argv[1])
lease = client.lock(sys.argv[2], ttl=3).acquire()
print(lease.token, flush=True)
time.sleep(3600)
"""


@dataclass
class Cluster:
    """Three members, the URL that lists them, and how to tell who leads."""

    members: Sequence[ServerProcess]
    url: str
    leads: Callable[[ServerProcess], bool]
    serving: Callable[[Sequence[ServerProcess]], bool]  # these members have a leader

    def leader(self) -> ServerProcess:
        return next(member for member in self.members if self.leads(member))


def _etcd(members: list[EtcdServer]) -> Cluster:
    def leads(member: ServerProcess) -> bool:
        status = etcd_call(members[0], "maintenance/status", {})
        mine = etcd_call(member, "maintenance/status", {})  # type: ignore[arg-type]
        return str(mine["header"]["member_id"]) == str(status["leader"])  # type: ignore[index]

    return Cluster(members, members[0].url, leads, lambda rest: all(m.ready() for m in rest))


def _zookeeper(members: list[ZooKeeperServer]) -> Cluster:
    def leads(member: ServerProcess) -> bool:
        return bool(member.mode() == "leader")  # type: ignore[attr-defined]

    return Cluster(members, members[0].url, leads, lambda rest: any(leads(m) for m in rest))


@pytest.fixture(scope="module", params=["etcd", "zookeeper"])
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with ServerPool(tmp_path_factory.mktemp) as pool:
        if request.param == "etcd":
            yield _etcd(pool.etcd(3))
        else:
            yield _zookeeper(pool.zookeeper(3))


def test_a_killed_holder_frees_the_lock_by_its_ttl_and_the_next_token_is_higher(
    cluster: Cluster,
) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, cluster.url, "killed/holder"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        token = int(holder.stdout.readline())
        with fencelock.connect(cluster.url) as client:
            assert client.lock("killed/holder").try_acquire() is None
            holder.kill()  # SIGKILL: no release, no revoke, no closeSession
            started = time.monotonic()
            lease = client.lock("killed/holder").acquire(timeout=30)
            # its etcd lease or session (3 s asked, at least the server's minimum) ran
            # out on the servers, not sooner
            assert time.monotonic() - started >= 1.0
            assert lease.token > token
            lease.release()
    finally:
        holder.kill()
        holder.wait(10)


def test_losing_the_leader_loses_no_lease_and_the_lock_keeps_working(cluster: Cluster) -> None:
    with fencelock.connect(cluster.url) as client, fencelock.connect(cluster.url) as other:
        lease = client.lock("leader/loss", ttl=10).acquire()
        leader = cluster.leader()
        leader.kill()
        rest = [m for m in cluster.members if m is not leader]
        try:
            wait_until(
                lambda: cluster.serving(rest),
                what="the other two to elect a leader",
                timeout=SETTLE,
                interval=0.1,
            )
            time.sleep(4)  # more than a third of the TTL: renewed through the new leader
            assert not lease.lost, lease.lost_reason
            assert other.lock("leader/loss").try_acquire() is None
            lease.release()
            again = other.lock("leader/loss").acquire(timeout=30)
            assert again.token > lease.token
            again.release()
        finally:
            leader.start()
            wait_until(
                lambda: cluster.serving(cluster.members),
                what="the leader back",
                timeout=SETTLE,
                interval=0.1,
            )
