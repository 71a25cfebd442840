"""A line of 20 waiting processes on etcd and ZooKeeper: served in arrival order, each
woken only by its predecessor's release (its tries counted, not guessed)."""

from __future__ import annotations

import functools
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest

import fencelock
from fencelock.engine.acquire import NOTICE_LIVENESS
from fencelock.testing import ServerPool
from tests.polling import wait_until

WAITERS = 20
WAITER = """
import sys, time, fencelock
with fencelock.connect(sys.argv[1]) as client:
    started = time.monotonic()
    lease = client.lock(sys.argv[2], ttl=10).acquire(timeout=300)
    waited = time.monotonic() - started
    print(sys.argv[3], lease.token, lease.attempts, f"{waited:.3f}", flush=True)
    time.sleep(0.05)
    lease.release()
"""


@pytest.fixture(scope="module")
def urls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Callable[[], str]]]:
    with ServerPool(tmp_path_factory.mktemp) as pool:
        started: dict[str, str] = {}

        def etcd() -> str:
            return started.setdefault("etcd", pool.etcd(1)[0].url)

        def zookeeper() -> str:
            return started.setdefault("zookeeper", pool.zookeeper(1)[0].url)

        yield {"etcd": etcd, "zookeeper": zookeeper}


def in_line(client: fencelock.Client, name: str, count: int) -> bool:
    """Whether at least ``count`` waiters are in line for ``name``."""
    info = client.inspect(name)
    return info is not None and (info.waiters or 0) >= count


@pytest.mark.parametrize("kind", ["etcd", "zookeeper"])
def test_twenty_waiting_processes_are_served_in_order_each_woken_once(
    urls: dict[str, Callable[[], str]], kind: str
) -> None:
    url, name = urls[kind](), "line/twenty"
    waiters: list[subprocess.Popen[str]] = []
    with fencelock.connect(url) as client:
        holder = client.lock(name, ttl=10).acquire()
        try:
            for i in range(WAITERS):
                waiters.append(
                    subprocess.Popen(
                        [sys.executable, "-c", WAITER, url, name, str(i)],
                        stdout=subprocess.PIPE,
                        text=True,
                    )
                )
                wait_until(
                    functools.partial(in_line, client, name, i + 1),
                    what=f"waiter {i} in line",
                    timeout=60,
                )
            holder.release()
            reports = [w.communicate(timeout=120)[0].split() for w in waiters]
        finally:
            for waiter in waiters:
                waiter.kill()
                waiter.wait(10)
    served = sorted(reports, key=lambda report: int(report[1]))  # by token: service order
    assert [int(report[0]) for report in served] == list(range(WAITERS))
    assert int(served[0][1]) > holder.token
    for index, _token, attempts, waited in reports:
        # one try on arrival, one when its predecessor left, one per liveness look
        allowed = 2 + int(float(waited) // NOTICE_LIVENESS)
        assert int(attempts) <= allowed, (
            f"waiter {index} tried {attempts} times in {waited}s: woken by other releases"
        )
