"""Run-once jobs (ShedLock's semantics) and ``Lease.expire_in``, on every backend: skip
rather than wait, at_most as the lease's unrenewed TTL, at_least kept on the server
where a lease outlives its client or the backend keeps the name (ZooKeeper), and a clear
ConfigError where it cannot."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

import fencelock
from fencelock import clock
from fencelock.backends.base import leaves_names_taken
from tests.contract.conftest import BackendCase


def _wait_free(client: fencelock.Client, name: str, limit: float) -> None:
    started = clock.now()
    while client.locked(name):
        assert clock.now() - started < limit, f"{name} still taken after {limit}s"
        time.sleep(0.02)


def test_a_run_once_job_runs_once_and_a_busy_one_is_skipped(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    calls: list[int] = []

    @fencelock.once(name, at_most=30, client=client)
    def job(n: int) -> int:
        calls.append(n)
        assert other.locked(name)  # held while it runs
        return n * 2

    assert job(21) == 42
    assert calls == [21]
    assert not other.locked(name)  # no at_least: released at once
    with other.lock(name):
        assert job(1) is fencelock.SKIPPED
        assert not job(1)
        strict = fencelock.once(name, at_most=30, client=client, on_skip="raise")(job)
        with pytest.raises(fencelock.Skipped, match="skipped"):
            strict(2)
    assert calls == [21]


def test_a_long_at_most_works_on_every_backend(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    """at_most=600, as the docs' examples use it: more than a ZooKeeper session can last
    (where a lease ends with its client it is a renewed lease held at most that long)."""

    @fencelock.once(name, at_most=600, client=client)
    def job() -> bool:
        return other.locked(name)

    assert job() is True
    assert not other.locked(name)


def test_at_least_keeps_the_name_taken_after_a_fast_job(
    backend: BackendCase, client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    @fencelock.once(name, at_most=30, at_least=2.5, client=client)
    def job() -> str:
        return "done"

    if not leaves_names_taken(client.internals.backend, False):
        with pytest.raises(fencelock.ConfigError, match="at_least needs a lease"):
            job()
        return
    started = clock.now()
    assert job() == "done"
    assert other.locked(name)
    assert client.held() == []
    assert job() is fencelock.SKIPPED  # a second node a moment later
    _wait_free(other, name, 15)
    assert clock.now() - started >= 2.4  # not freed before at_least (less a clock tick)
    assert job() == "done"  # and taken again once it is free


def test_a_job_that_overruns_at_most_returns_and_warns(
    client: fencelock.Client, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    @fencelock.once(name, at_most=0.2, client=client)
    def slow() -> str:
        time.sleep(0.6)
        return "late"

    with caplog.at_level(logging.WARNING, logger="fencelock"):
        assert slow() == "late"
    assert any("longer than at_most" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("renew", [True, False], ids=["renewed", "unrenewed"])
def test_expire_in_leaves_the_name_to_its_ttl(
    backend: BackendCase, other: fencelock.Client, name: str, renew: bool
) -> None:
    client = fencelock.connect(backend.url)
    lease = client.lock(name, renew=renew).acquire()
    if not leaves_names_taken(client.internals.backend, renew):
        with pytest.raises(fencelock.ConfigError, match="outlives its client"):
            lease.expire_in(5)
        lease.release()
        client.close()
        return
    lease.expire_in(30)
    assert lease.released
    assert client.held() == []
    client.close()  # not released by the close either
    info = other.inspect(name)
    assert info is not None
    assert info.held
    assert info.remaining is not None
    assert 0 < info.remaining <= 30
    assert other.evict(name) is not None  # an operator ends the keep early
    taken = other.lock(name).acquire(timeout=0)
    assert taken.token > lease.token
    taken.release()
    with pytest.raises(fencelock.ConfigError, match="expire_in must be > 0"):
        other.lock(name + "/x", renew=False).acquire().expire_in(0)


def test_a_run_once_coroutine(backend: BackendCase, name: str) -> None:
    async def main() -> None:
        async with (
            fencelock.aconnect(backend.url) as client,
            fencelock.aconnect(backend.url) as other,
        ):

            @fencelock.once(name, at_most=30, client=client)
            async def job() -> str:
                assert await other.locked(name)
                return "ran"

            assert await job() == "ran"
            async with other.lock(name):
                assert await job() is fencelock.SKIPPED
            with (
                fencelock.connect("memory://") as blocking,
                pytest.raises(fencelock.ConfigError, match="needs an AsyncClient"),
            ):
                fencelock.once(name, at_most=30, client=blocking)(job)

    asyncio.run(main())


def test_a_waiter_waits_out_a_kept_name(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    """A name left taken by ``expire_in`` is taken again only when the keep ends, by a
    waiter that sleeps until then (where nothing rings at a keep's end) or is woken."""
    if not leaves_names_taken(client.internals.backend, False):
        pytest.skip("no name is kept after its lease here (its ConfigError is tested)")
    lease = client.lock(name, renew=False).acquire()
    lease.expire_in(2)
    started = clock.now()
    again = other.lock(name).acquire(timeout=30)
    assert clock.now() - started >= 1.5  # not before the keep ended (less the trip here)
    assert again.token > lease.token
    again.release()
