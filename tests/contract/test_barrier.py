"""Barriers and double barriers, the same on every backend with latches: no party passes
before the last has arrived, a missing party is a timeout, and a clear ConfigError where
there are no latches (MySQL)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import fencelock
from fencelock.backends.base import async_latching, holds_latches, latching
from tests.contract.conftest import BackendCase

PARTIES = 3


def _supported(client: fencelock.Client) -> bool:
    return holds_latches(client.internals.backend) or latching(client.internals.backend) is not None


def test_no_party_passes_before_the_last_arrives(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    if not _supported(client):
        with pytest.raises(fencelock.ConfigError, match="built on a count-down latch"):
            client.barrier(name, PARTIES)
        return
    arrived: list[float] = []
    passed: list[tuple[float, bool]] = []

    def party(through: fencelock.Client, delay: float) -> None:
        time.sleep(delay)
        barrier = through.barrier(name, PARTIES)
        arrived.append(time.monotonic())
        outcome = barrier.wait(timeout=60)
        passed.append((time.monotonic(), outcome))

    threads = [
        threading.Thread(target=party, args=(client if n % 2 else other, 0.2 * n))
        for n in range(PARTIES)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)
    assert len(passed) == PARTIES
    assert all(ok for _, ok in passed)
    assert min(at for at, _ in passed) >= max(arrived)  # nobody before the last arrival


def test_a_missing_party_is_a_timeout(client: fencelock.Client, name: str) -> None:
    if not _supported(client):
        pytest.skip("no latches here (the ConfigError is tested above)")
    barrier = client.barrier(name, 2)
    started = time.monotonic()
    assert barrier.wait(timeout=0.3) is False
    assert time.monotonic() - started >= 0.3
    assert barrier.arrived() == 1  # the arrival still counts: the next party opens it
    assert client.barrier(name, 2).wait(timeout=30) is True


def test_a_double_barrier_enters_and_leaves_together(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    if not _supported(client):
        with pytest.raises(fencelock.ConfigError, match="built on a count-down latch"):
            client.double_barrier(name, 2)
        return
    steps: list[str] = []

    def party(through: fencelock.Client, label: str, work: float) -> None:
        double = through.double_barrier(name, 2)
        assert double.enter(timeout=60)
        steps.append(f"{label} in")
        time.sleep(work)
        steps.append(f"{label} done")
        assert double.leave(timeout=60)
        steps.append(f"{label} out")

    quick = threading.Thread(target=party, args=(client, "quick", 0.0))
    slow = threading.Thread(target=party, args=(other, "slow", 0.3))
    quick.start()
    time.sleep(0.2)
    slow.start()
    quick.join(90)
    slow.join(90)
    assert steps.index("quick out") > steps.index("slow done")  # left only when all had
    assert max(steps.index("quick in"), steps.index("slow in")) < steps.index("slow done")


def test_asyncio_barrier(backend: BackendCase, name: str) -> None:
    async def main() -> None:
        async with fencelock.aconnect(backend.url) as client:
            async_backend = client.internals.backend
            if not (holds_latches(async_backend) or async_latching(async_backend) is not None):
                with pytest.raises(fencelock.ConfigError, match="count-down latch"):
                    client.barrier(name, 2)
                return
            barrier = client.barrier(name, 2)
            outcomes = await asyncio.gather(barrier.wait(30), client.barrier(name, 2).wait(30))
            assert list(outcomes) == [True, True]

    asyncio.run(main())
