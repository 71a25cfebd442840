"""A waiter keeps waiting through a server's restart or pause, within its timeout.

Seen before: waiters with ``acquire(timeout=90)`` raised ``BackendUnavailable`` during
a 6 s restart (PostgreSQL lease table, MariaDB), and on etcd an undocumented
``SessionEnded`` when the waiter's session expired while its member was paused. Now
the waiter retries with the one backoff and gets the lock once it is free.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import fencelock
from fencelock.testing import ServerPool
from fencelock.testing.process import ServerProcess
from tests.contract.conftest import selected

pytestmark = pytest.mark.timeout(240)
DEADLINE = 90.0


def _start(pool: ServerPool, kind: str) -> tuple[str, ServerProcess]:
    if kind == "postgresql":
        pg = pool.postgresql(name="outage-pg")
        return pg.url, pg
    if kind == "mysql":
        maria = pool.mariadb(name="outage-mariadb")
        return maria.url, maria
    (etcd,) = pool.etcd(name="outage-etcd")
    return f"etcd://{etcd.address}", etcd


@pytest.fixture(params=selected(["postgresql", "mysql", "etcd"]))
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, ServerProcess]]:
    with ServerPool.under(tmp_path) as pool:
        yield _start(pool, request.param)


def test_a_waiter_waits_through_an_outage(server: tuple[str, ServerProcess]) -> None:
    url, process = server
    outcome: list[object] = []
    with fencelock.connect(url) as holder_client, fencelock.connect(url) as waiter_client:
        held = holder_client.lock("outage/x", ttl=2).acquire()

        def wait() -> None:
            try:
                outcome.append(waiter_client.lock("outage/x", ttl=2).acquire(timeout=DEADLINE))
            except fencelock.FencelockError as exc:
                outcome.append(exc)

        waiter = threading.Thread(target=wait)
        waiter.start()
        time.sleep(0.5)  # queued
        if url.startswith("etcd"):
            process.pause()  # past both sessions' TTL: the waiter's place ends too
            time.sleep(5)
            process.resume()
        else:
            process.kill()
            process.start()
        with contextlib.suppress(fencelock.FencelockError):
            held.release()  # or its TTL ends it: the holder could not renew meanwhile
        waiter.join(DEADLINE + 10)
        assert outcome, "the waiter never returned"
        lease = outcome[0]
        assert isinstance(lease, fencelock.Lease), f"the waiter gave up: {lease!r}"
        assert lease.token > held.token
        lease.release()
