"""zookeeper:// under failures, on a 3-member ensemble: a holder killed with SIGKILL
frees the lock once its session times out, and killing the leader loses no lease."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

import fencelock
from fencelock.testing import ServerPool, ZooKeeperServer
from tests.consensus.test_servers import eventually

HOLDER = """
import sys, time, fencelock
client = fencelock.connect(sys.argv[1])
lease = client.lock(sys.argv[2], ttl=3).acquire()
print(lease.token, flush=True)
time.sleep(3600)
"""


@pytest.fixture(scope="module")
def ensemble(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[ZooKeeperServer]]:
    with ServerPool(tmp_path_factory.mktemp) as pool:
        yield pool.zookeeper(3)


def test_a_killed_holder_frees_the_lock_by_its_session_and_the_next_token_is_higher(
    ensemble: list[ZooKeeperServer],
) -> None:
    url = ensemble[0].url
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, url, "killed/holder"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        token = int(holder.stdout.readline())
        with fencelock.connect(url) as client:
            assert client.lock("killed/holder").try_acquire() is None
            holder.kill()  # SIGKILL: no release, no closeSession
            started = time.monotonic()
            lease = client.lock("killed/holder").acquire(timeout=30)
            # its session (3 s asked) timed out on the servers, not sooner
            assert time.monotonic() - started >= 1.0
            assert lease.token > token
            lease.release()
    finally:
        holder.kill()
        holder.wait(10)


def test_losing_the_leader_loses_no_lease_and_the_lock_keeps_working(
    ensemble: list[ZooKeeperServer],
) -> None:
    url = ensemble[0].url
    with fencelock.connect(url) as client, fencelock.connect(url) as other:
        lease = client.lock("leader/loss", ttl=10).acquire()
        leader = next(m for m in ensemble if m.mode() == "leader")
        leader.kill()
        rest = [m for m in ensemble if m is not leader]
        try:
            eventually(lambda: any(m.mode() == "leader" for m in rest), "a new leader")
            time.sleep(4)  # more than a third of the TTL: renewed through the new leader
            assert not lease.lost, lease.lost_reason
            assert other.lock("leader/loss").try_acquire() is None
            lease.release()
            again = other.lock("leader/loss").acquire(timeout=30)
            assert again.token > lease.token
            again.release()
        finally:
            leader.start()
