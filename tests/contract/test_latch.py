"""Count-down latches, the same on every backend whose leases outlive their client or
that keeps latches itself (ZooKeeper):
armed once, counted down by anyone, waiters woken at zero, the count kept when the
client that armed it is gone; a clear ConfigError elsewhere."""

from __future__ import annotations

import asyncio
import multiprocessing
import threading

import pytest

import fencelock
from fencelock.backends.base import holds_latches, latching
from fencelock.engine.latch import LatchNames
from fencelock.engine.timing import MAX_TTL
from tests.contract.conftest import BackendCase


def _supported(client: fencelock.Client) -> bool:
    return holds_latches(client.internals.backend)


def test_count_down_to_zero_wakes_the_waiters(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    if not _supported(client):
        with pytest.raises(fencelock.ConfigError, match="must outlive the clients"):
            client.latch(name)
        return
    latch = client.latch(name)
    assert latch.wait(timeout=0)  # never armed: open
    assert latch.try_set_count(3)
    assert not other.latch(name).try_set_count(5)  # counting already
    assert latch.count() == 3
    woken: list[bool] = []
    waiter = threading.Thread(target=lambda: woken.append(other.latch(name).wait(timeout=60)))
    waiter.start()
    assert not latch.wait(timeout=0.2)
    assert other.latch(name).count_down()
    assert latch.count() == 2
    assert latch.count_down()
    assert latch.count_down()
    waiter.join(60)
    assert woken == [True]
    assert latch.count() == 0
    assert latch.wait(timeout=0)
    assert not latch.count_down()  # open: nothing to count down
    assert latch.try_set_count(1)  # open again: it may be armed again
    assert latch.count_down()


def test_the_count_outlives_the_client_that_armed_it(
    backend: BackendCase, other: fencelock.Client, name: str
) -> None:
    armer = fencelock.connect(backend.url)
    if not _supported(armer):
        armer.close()
        pytest.skip(f"{backend.url.split('://')[0]}:// has no latch (its ConfigError is tested)")
    assert armer.latch(name).try_set_count(2)
    armer.close()  # gone, as if it had crashed after arming
    latch = other.latch(name)
    assert latch.count() == 2
    assert not latch.wait(timeout=0.1)
    latch.count_down()
    latch.count_down()
    assert latch.wait(timeout=10)


def test_concurrent_count_downs_each_take_one_count(
    backend: BackendCase, client: fencelock.Client, name: str
) -> None:
    if not _supported(client):
        pytest.skip("no latch here (its ConfigError is tested)")
    assert client.latch(name).try_set_count(8)
    taken: list[bool] = []

    def count_down_twice() -> None:
        with fencelock.connect(backend.url) as mine:
            taken.extend(mine.latch(name).count_down() for _ in range(2))

    threads = [threading.Thread(target=count_down_twice) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(taken) == [False] * 4 + [True] * 8, taken  # 12 tries: 8 counts, then open
    assert client.latch(name).count() == 0
    assert client.latch(name).wait(timeout=0)


def test_bad_counts_are_refused(client: fencelock.Client, name: str) -> None:
    if not _supported(client):
        pytest.skip("no latch here (its ConfigError is tested)")
    for bad in (0, -1, 2.5, True):
        with pytest.raises(fencelock.ConfigError, match="count must be an int"):
            client.latch(name).try_set_count(bad)  # type: ignore[arg-type]


def test_async_latch(backend: BackendCase, name: str) -> None:
    async def main() -> None:
        async with (
            fencelock.aconnect(backend.url) as client,
            fencelock.aconnect(backend.url) as other,
        ):
            if not holds_latches(client.internals.backend):
                with pytest.raises(fencelock.ConfigError):
                    client.latch(name)
                return
            assert await client.latch(name).try_set_count(2)
            assert not await other.latch(name).wait(timeout=0.3)  # it waited: not open
            waiting = asyncio.create_task(other.latch(name).wait(timeout=60))
            await client.latch(name).count_down()
            await other.latch(name).count_down()
            assert await waiting
            assert await client.latch(name).count() == 0

    asyncio.run(main())


_INHERITED: dict[str, fencelock.Latch] = {}


def _count_down_in_child(_: int) -> bool:
    return _INHERITED["latch"].count_down()


def test_a_latch_made_before_fork_counts_down_in_the_child(
    backend: BackendCase, client: fencelock.Client, name: str
) -> None:
    """A forked worker uses the latch object its parent made (Celery prefork, gunicorn
    --preload): through its own connections, never the parent's."""
    if not _supported(client) or not backend.cross_process:
        pytest.skip("no latch another process sees here")
    latch = _INHERITED["latch"] = client.latch(name)
    try:
        assert latch.try_set_count(3)
        assert latch.count() == 3  # the parent's connections open
        with multiprocessing.get_context("fork").Pool(2) as pool:
            counted = pool.map_async(_count_down_in_child, range(2)).get(timeout=60)
        assert counted == [True, True]
        assert latch.count() == 1  # the parent's own latch still works too
        assert latch.count_down()
        assert latch.wait(timeout=5)
    finally:
        del _INHERITED["latch"]


def _client_built(client: fencelock.Client) -> bool:
    return _supported(client) and latching(client.internals.backend) is None


def test_a_count_down_that_died_between_its_two_steps_is_finished_by_the_next_call(
    client: fencelock.Client, name: str
) -> None:
    """What a count-down killed after evicting the last count leaves: ``closed`` left
    for a year and no count. It was wedged a year (count 0, wait False, set_count
    False); the next call opens the latch, as the dead count-down would have."""
    if not _client_built(client):
        pytest.skip("no client-built latch here (a native one is one step on the server)")
    names = LatchNames(name)
    client.lock(names.closed, ttl=5, renew=False).acquire().expire_in(MAX_TTL)
    latch = client.latch(name)
    assert latch.count() == 0
    assert latch.wait(timeout=0)
    assert latch.try_set_count(2)
    assert latch.count() == 2


def test_an_arming_that_died_midway_is_rolled_back_by_the_next_call(
    client: fencelock.Client, name: str
) -> None:
    """An armer killed after leaving some counts: its brief ``closed`` runs out and the
    counts stay. It was wedged a year (set_count False); now they are evicted."""
    if not _client_built(client):
        pytest.skip("no client-built latch here (a native one is one step on the server)")
    names = LatchNames(name)
    for k in range(2):
        client.lock(names.count(k), ttl=5, renew=False).acquire().expire_in(MAX_TTL)
    latch = client.latch(name)
    assert latch.count() == 0
    assert latch.wait(timeout=0)
    assert latch.try_set_count(1)
    assert latch.count() == 1
    assert latch.count_down()
    assert latch.wait(timeout=0)
    assert not client.list(names.counts) or not any(i.held for i in client.list(names.counts))
