"""A hung server (SIGSTOP) never holds a caller past its timeout plus one request.

``acquire(timeout=T)`` returns (LockTimeout or BackendUnavailable) within T plus
:data:`~fencelock.engine.timing.REQUEST_BOUND`, and the release of a lease already lost
waits no longer than that bound, on every server backend, in sync and async. Measured
before the bound: etcd 10-20 s, ZooKeeper 30 s, PostgreSQL 5 s, MariaDB 6 s for an
``acquire(timeout=0)``; 10 s to release a lost lease on etcd and ZooKeeper.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import fencelock
from fencelock.engine.timing import REQUEST_BOUND
from fencelock.testing import ServerPool
from fencelock.testing.process import ServerProcess
from tests.contract.conftest import selected

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

TTL = 4.0  # ZooKeeper's shortest session here
SLACK = 1.5  # a loaded 2-core machine's scheduling, on top of the promised bound
KINDS = selected(["redis", "etcd", "zookeeper", "postgresql", "advisory", "mysql"])


def _start(pool: ServerPool, kind: str) -> tuple[str, ServerProcess]:
    if kind == "redis":
        redis = pool.redis(name="hung-redis")
        return f"{redis.url}?timeout=5", redis  # a socket timeout the call must cut short
    if kind == "etcd":
        (etcd,) = pool.etcd(name="hung-etcd")
        return f"etcd://{etcd.address}", etcd
    if kind == "zookeeper":
        (zk,) = pool.zookeeper(name="hung-zk")
        return f"zookeeper://{zk.address}", zk
    if kind in ("postgresql", "advisory"):
        pg = pool.postgresql(name=f"hung-{kind}")
        scheme = "postgresql+advisory://" if kind == "advisory" else "postgresql://"
        return pg.url.replace("postgresql://", scheme, 1), pg
    maria = pool.mariadb(name="hung-mariadb")
    return maria.url, maria


@pytest.fixture(scope="module", params=KINDS)
def hung(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, ServerProcess]]:
    with ServerPool.under(Path(tmp_path_factory.mktemp("hung"))) as pool:
        yield _start(pool, request.param)


def _within(bound: float, call: Callable[[], object]) -> None:
    started = time.monotonic()
    with contextlib.suppress(fencelock.FencelockError):
        call()
    took = time.monotonic() - started
    assert took < bound + SLACK, f"returned after {took:.2f}s, bound {bound:g}s"


def test_a_blocking_caller_keeps_its_timeout(hung: tuple[str, ServerProcess]) -> None:
    url, server = hung
    with fencelock.connect(url) as holder, fencelock.connect(url) as other:
        lease = holder.lock("hung/held", ttl=TTL).acquire()
        server.pause()
        try:
            _within(REQUEST_BOUND, lambda: other.lock("hung/a").acquire(timeout=0))
            _within(1 + REQUEST_BOUND, lambda: other.lock("hung/b").acquire(timeout=1))
            assert lease.lost_event.wait(3 * TTL), "a lease on a hung server was never lost"
            _within(REQUEST_BOUND, lease.release)
        finally:
            server.resume()


def test_fencelock_run_on_a_hung_server_exits_soon_after_the_lease_ends(
    hung: tuple[str, ServerProcess],
) -> None:
    """CMD is stopped inside the lease; the run's line and exit 76 follow the lease's
    end within one request bound (they came 10-14 s later on etcd, ZooKeeper, MySQL)."""
    url, server = hung
    fencelock_cli = str(Path(sys.executable).parent / "fencelock")
    args = [fencelock_cli, "run", "--url", url, "--ttl", str(TTL), "hung/run", "--", "sleep", "60"]
    run = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(TTL / 2)  # renewed once
        assert run.poll() is None, run.communicate()[1]
        paused = time.monotonic()
        server.pause()
        try:
            _, stderr = run.communicate(timeout=60)
        finally:
            server.resume()
        took = time.monotonic() - paused
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 76, stderr
    assert "the command was stopped" in stderr
    assert took < TTL + 2 * REQUEST_BOUND + SLACK, f"exited {took:.2f}s after the pause"


def test_an_asyncio_caller_keeps_its_timeout(hung: tuple[str, ServerProcess]) -> None:
    url, server = hung

    async def timed(bound: float, call: Callable[[], object]) -> None:
        started = time.monotonic()
        with contextlib.suppress(fencelock.FencelockError):
            await call()  # type: ignore[misc]
        took = time.monotonic() - started
        assert took < bound + SLACK, f"returned after {took:.2f}s, bound {bound:g}s"

    async def main() -> None:
        async with fencelock.aconnect(url) as holder, fencelock.aconnect(url) as other:
            lease = await holder.lock("hung/aheld", ttl=TTL).acquire()
            server.pause()
            try:
                await timed(REQUEST_BOUND, lambda: other.lock("hung/c").acquire(timeout=0))
                await timed(1 + REQUEST_BOUND, lambda: other.lock("hung/d").acquire(timeout=1))
                deadline = time.monotonic() + 3 * TTL
                while not lease.lost:
                    assert time.monotonic() < deadline, "a lease on a hung server was never lost"
                    await asyncio.sleep(0.05)
                await timed(REQUEST_BOUND, lease.release)
            finally:
                server.resume()

    asyncio.run(main())


def test_the_urls_request_bound_sets_how_long_past_the_timeout(
    hung: tuple[str, ServerProcess],
) -> None:
    """``?request_bound=S`` gives the request in flight S seconds, in sync and async, and
    the error names the option (a loaded machine's user can lengthen it)."""
    url, server = hung
    if url.startswith("redis"):
        pytest.skip("Redis answers first through its own socket timeout (the URL's timeout)")
    longer = REQUEST_BOUND + 1
    url = f"{url}{'&' if '?' in url else '?'}request_bound={longer:g}"

    def timed(call: Callable[[], object]) -> tuple[float, str]:
        started = time.monotonic()
        with pytest.raises(fencelock.BackendUnavailable) as raised:
            call()
        return time.monotonic() - started, str(raised.value)

    async def in_asyncio() -> tuple[float, str]:
        async with fencelock.aconnect(url) as client:
            await client.lock("hung/warm").acquire(timeout=5)  # connected before the pause
            server.pause()
            try:
                started = time.monotonic()
                with pytest.raises(fencelock.BackendUnavailable) as raised:
                    await client.lock("hung/f").acquire(timeout=0)
                return time.monotonic() - started, str(raised.value)
            finally:
                server.resume()  # before the client closes: its close talks to the server

    with fencelock.connect(url) as client:
        client.lock("hung/warm2").acquire(timeout=5)
        server.pause()
        try:
            blocking = timed(lambda: client.lock("hung/e").acquire(timeout=0))
        finally:
            server.resume()
    try:
        asynchronous = asyncio.run(in_asyncio())
    finally:
        server.resume()
    for took, message in (blocking, asynchronous):
        assert longer <= took < longer + SLACK, (
            f"returned after {took:.2f}s ({blocking[0]:.2f}, {asynchronous[0]:.2f})"
        )
        assert f"plus {longer:g}s for the request in flight: the URL's request_bound" in message
