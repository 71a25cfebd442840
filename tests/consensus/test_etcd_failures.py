"""etcd:// under failures, on a 3-member cluster: a holder killed with SIGKILL frees the
lock by its TTL, and the loss of the cluster's leader loses no lease."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

import fencelock
from fencelock.check.servers import ProxyHub
from fencelock.testing import EtcdServer, ServerPool
from tests.consensus.test_servers import etcd_call, eventually, leader_of

HOLDER = """
import sys, time, fencelock
client = fencelock.connect(sys.argv[1])
lease = client.lock(sys.argv[2], ttl=3).acquire()
print(lease.token, flush=True)
time.sleep(3600)
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[EtcdServer]]:
    with ServerPool(tmp_path_factory.mktemp) as pool:
        yield pool.etcd(3)


def test_a_killed_holder_frees_the_lock_by_its_ttl_and_the_next_token_is_higher(
    cluster: list[EtcdServer],
) -> None:
    url = cluster[0].url
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, url, "killed/holder"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        token = int(holder.stdout.readline())
        with fencelock.connect(url) as client:
            assert client.lock("killed/holder").try_acquire() is None
            holder.kill()  # SIGKILL: no release, no revoke
            started = time.monotonic()
            lease = client.lock("killed/holder").acquire(timeout=30)
            # its etcd lease (3 s asked, at least etcd's minimum) ran out, not sooner
            assert time.monotonic() - started >= 1.0
            assert lease.token > token
            lease.release()
    finally:
        holder.kill()
        holder.wait(10)


def test_losing_the_leader_loses_no_lease_and_the_lock_keeps_working(
    cluster: list[EtcdServer],
) -> None:
    url = cluster[0].url
    with fencelock.connect(url) as client, fencelock.connect(url) as other:
        lease = client.lock("leader/loss", ttl=10).acquire()
        leader_id = leader_of(cluster[0])
        leader = next(
            m
            for m in cluster
            if str(etcd_call(m, "maintenance/status", {})["header"]["member_id"])  # type: ignore[index]
            == leader_id
        )
        leader.kill()
        rest = [m for m in cluster if m is not leader]
        try:
            eventually(lambda: all(m.ready() for m in rest), "the other two elect a leader")
            time.sleep(4)  # more than a third of the TTL: renewed through the new leader
            assert not lease.lost, lease.lost_reason
            assert other.lock("leader/loss").try_acquire() is None
            lease.release()
            again = other.lock("leader/loss").acquire(timeout=30)
            assert again.token > lease.token
            again.release()
        finally:
            leader.start()


def test_a_release_that_lands_late_never_deletes_the_next_lease_of_the_same_client(
    cluster: list[EtcdServer],
) -> None:
    """Found by ``fencelock check --nemesis partition``: a release sent while cut off is
    sent again once the link heals; a new acquire by the same client (same session, so
    the same ``NAME/<lease>`` key) must not adopt the old key, or that late release
    deletes it under the new holder and lets someone else in beside it."""
    hub = ProxyHub()
    try:
        routed = hub.route(0, [("127.0.0.1", member.port) for member in cluster])
        through = "etcd://" + ",".join(f"{h}:{p}" for h, p in routed)
        with (
            fencelock.connect(through + "?timeout=0.3&connect_timeout=0.3") as client,
            fencelock.connect(cluster[0].url) as other,
        ):
            first = client.lock("late/release", ttl=5).acquire()
            hub.cut(0)
            first.release()  # unanswered: logged, and sent again in the background
            hub.heal(0)
            second = client.lock("late/release", ttl=5).acquire(timeout=10)
            time.sleep(1.5)  # the release is sent again after 0.5 s, and lands
            assert second.token > first.token
            assert not second.lost
            info = other.inspect("late/release")
            assert info is not None and info.owner == second.owner
            with pytest.raises(fencelock.LockTimeout):
                other.lock("late/release").acquire(timeout=0)
            second.release()
    finally:
        hub.close()
