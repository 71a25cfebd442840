"""etcd:// beyond the contract: interoperability with ``etcdctl lock`` both ways, a
waiter woken only by its predecessor, and bad input that ends in a fencelock error."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import fencelock
from fencelock.backends.etcd import gateway
from fencelock.testing import EtcdServer, ServerPool
from tests.polling import wait_until


@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdServer]:
    with ServerPool(tmp_path_factory.mktemp) as pool:
        yield pool.etcd(1)[0]


def etcdctl(member: EtcdServer, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "ETCDCTL_API": "3"}
    executable = shutil.which("etcdctl")
    if executable is None:
        pytest.skip("etcdctl is not installed (Debian's etcd-client)")
    return subprocess.Popen(
        [executable, "--endpoints", member.address, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def keys_under(member: EtcdServer, prefix: str) -> list[str]:
    """The keys under ``prefix``, as etcdctl lists them."""
    listing = etcdctl(member, "get", "--prefix", "--keys-only", prefix)
    out, _ = listing.communicate(timeout=30)
    return out.split()


def test_a_lock_held_by_etcdctl_keeps_fencelock_out_and_the_other_way_round(
    etcd: EtcdServer, tmp_path: Path
) -> None:
    url = etcd.url + "?prefix="
    held = etcdctl(etcd, "lock", "jobs/nightly", "--", "sh", "-c", "echo $ETCD_LOCK_REV; sleep 3")
    assert held.stdout is not None
    etcd_rev = int(held.stdout.readline())
    with fencelock.connect(url) as client:
        assert client.lock("jobs/nightly").try_acquire() is None  # etcdctl holds it
        lease = client.lock("jobs/nightly").acquire(timeout=30)  # once etcdctl is done
        assert lease.token > etcd_rev
        # now fencelock holds it: etcdctl waits, and its revision comes after ours
        waiting = etcdctl(etcd, "lock", "jobs/nightly", "--", "sh", "-c", "echo $ETCD_LOCK_REV")
        wait_until(
            lambda: len(keys_under(etcd, "jobs/nightly/")) == 2,
            what="etcdctl's key in line behind fencelock's",
        )
        time.sleep(1)  # in line: time to take the lock, were it to wrongly think it free
        assert waiting.poll() is None, "etcdctl took a lock fencelock holds"
        lease.release()
        out, _ = waiting.communicate(timeout=30)
        assert int(out.split()[0]) > lease.token
    held.wait(30)


def test_fencelock_run_exports_the_revision_etcdctl_would(etcd: EtcdServer) -> None:
    url = etcd.url + "?prefix="
    run = subprocess.run(
        [str(Path(sys.executable).parent / "fencelock"), "run", "--url", url, "deploy", "--",
         "sh", "-c", "echo $FENCELOCK_TOKEN"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    token = int(run.stdout.split()[-1])
    check = etcdctl(etcd, "lock", "deploy", "--", "sh", "-c", "echo $ETCD_LOCK_REV")
    out, _ = check.communicate(timeout=30)
    assert int(out.split()[0]) > token


def test_a_release_wakes_only_the_next_waiter(etcd: EtcdServer) -> None:
    with fencelock.connect(etcd.url) as holder_client:
        first = holder_client.lock("queue/x").acquire()
        got: list[int] = []

        def wait_in_line() -> None:
            with fencelock.connect(etcd.url) as c, c.lock("queue/x", timeout=60) as lease:
                got.append(lease.token)
                time.sleep(0.2)

        waiters = [threading.Thread(target=wait_in_line) for _ in range(3)]

        def in_line(count: int) -> bool:
            info = holder_client.inspect("queue/x")
            return info is not None and info.waiters == count

        for i, thread in enumerate(waiters):
            thread.start()
            wait_until(
                functools.partial(in_line, i + 1),
                what=f"{i + 1} waiters in line",
                interval=0.01,
            )
        first.release()
        for thread in waiters:
            thread.join(60)
        assert len(got) == 3
        assert got == sorted(got)
        assert got[0] > first.token


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("etcd://127.0.0.1:1", "unreachable"),
        ("etcd://127.0.0.1:2379/some/path", "take no path"),
        ("etcd://127.0.0.1:2379?nonsense=1", "unknown option"),
        ("etcd://user@127.0.0.1:2379", "both a user and a password"),
        ("etcd://127.0.0.1:2379?ca_file=/x", "needs TLS"),
    ],
)
def test_bad_input_is_a_fencelock_error_naming_it(url: str, message: str) -> None:
    started = time.monotonic()
    with (
        pytest.raises(fencelock.FencelockError, match=message),
        fencelock.connect(url) as client,
    ):
        client.lock("x").acquire(timeout=1)
    assert time.monotonic() - started < 30


def test_tls_against_a_plaintext_port_is_a_clear_error(etcd: EtcdServer) -> None:
    url = "etcds://" + etcd.address + "?connect_timeout=5"
    with (
        pytest.raises(fencelock.BackendUnavailable, match="TLS"),
        fencelock.connect(url) as client,
    ):
        client.lock("x").acquire(timeout=1)


def test_many_leases_cost_one_keepalive_and_one_listing_per_third_of_their_ttl(
    etcd: EtcdServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fencelock.backends.etcd import http

    sent: list[str] = []
    original = http.Gateway.call

    async def counted(
        self: http.Gateway, path: str, body: dict[str, object], patience: float | None = None
    ) -> object:
        sent.append(path)
        return await original(self, path, body, patience)

    monkeypatch.setattr(http.Gateway, "call", counted)
    with fencelock.connect(etcd.url) as client:
        leases = [client.lock(f"many/{i}", ttl=3).acquire() for i in range(300)]
        sent.clear()
        time.sleep(4)  # four renewal rounds of every lease
        assert not any(lease.lost for lease in leases)
        # per round one keepalive and one listing of the session's keys, not 300 requests
        assert 2 <= len(sent) <= 16, sent
        assert set(sent) <= {"lease/keepalive", "lease/timetolive"}
        for lease in leases:
            lease.release()


def _send_the_release_first(client: fencelock.Client, lease: fencelock.Lease) -> None:
    """Land the delete ``lease.release()`` will send, as a first send whose reply a
    leader change lost would have: the release then sends it again."""
    shared = client.internals.backend
    inner = shared._backend()  # type: ignore[attr-defined]
    held = inner._held[lease.owner]
    record = inner.release_record(lease.name, held.revision, lease.owner)
    delete = gateway.delete_if_value_txn(held.key, lease.owner.encode(), record)
    assert shared._loop.run(inner.call("kv/txn", delete))["succeeded"]  # type: ignore[attr-defined]


def test_a_release_sent_again_after_it_landed_is_a_release(etcd: EtcdServer) -> None:
    """Issue 23: after a leader kill a clean release was reported as a loss ("another
    owner had it at release"): the first delete landed, the one sent again found the key
    gone. A delete that finds its own release's record is a release."""
    with fencelock.connect(etcd.url) as client:
        lease = client.lock("resent/release").acquire()
        _send_the_release_first(client, lease)
        lease.release()  # no LeaseLost
        assert lease.released
        assert not lease.lost
        info = client.inspect("resent/release")
        assert info is not None
        assert info.owner is None
        assert info.token == lease.token


def test_a_release_by_another_client_is_still_a_loss(etcd: EtcdServer) -> None:
    with fencelock.connect(etcd.url) as client, fencelock.connect(etcd.url) as other:
        lease = client.lock("resent/stolen").acquire()
        assert other.internals.backend.release(lease.name, lease.owner)  # an operator's release
        with pytest.raises(fencelock.LeaseLost):
            lease.release()
