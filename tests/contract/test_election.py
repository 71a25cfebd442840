"""Leader election, the same on every backend: one leader at a time, its term a fencing
token greater than every earlier leader's, its value visible to observers, resign and
deposition hand over to the next campaigner."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator

import pytest

import fencelock
from fencelock.fencing import MemoryGuard
from tests.contract.conftest import BackendCase


def test_one_leader_its_term_and_value(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    mine, theirs = client.election(name, ttl=5), other.election(name, ttl=5)
    assert mine.leader() is None
    leading = mine.campaign(value="host-a:8080")
    seen = theirs.leader()
    assert seen is not None
    assert seen.term == leading.term
    assert seen.value == "host-a:8080"
    assert seen.owner == leading.lease.owner
    with pytest.raises(fencelock.LockTimeout):
        theirs.campaign(value="host-b:8080", timeout=0.3)
    leading.resign()
    assert theirs.leader() is None
    next_leader = theirs.campaign(value="host-b:8080", timeout=10)
    assert next_leader.term > leading.term
    seen = mine.leader()
    assert seen is not None
    assert (seen.term, seen.value) == (next_leader.term, "host-b:8080")
    next_leader.resign()


def test_a_campaigner_waits_and_leads_when_the_leader_resigns(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    leading = client.election(name, ttl=5).campaign()
    assert client.election(name).leader() is not None
    won: list[fencelock.Leadership] = []
    waiting = threading.Thread(target=lambda: won.append(other.election(name).campaign()))
    waiting.start()
    leading.resign()
    waiting.join(30)
    assert won
    assert won[0].term > leading.term
    seen = client.election(name).leader()
    assert seen is not None
    assert seen.value is None
    assert seen.term == won[0].term
    won[0].resign()


def test_a_deposed_leaders_writes_are_fenced(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    guard = MemoryGuard()
    old = client.election(name, ttl=5).campaign(value="old")
    guard.accept("config", old.term)
    assert other.evict(name) is not None  # an operator deposes it
    assert old.wait_lost(15)
    assert old.lost
    new = other.election(name, ttl=5).campaign(value="new", timeout=15)
    guard.accept("config", new.term)
    with pytest.raises(fencelock.StaleToken):
        guard.accept("config", old.term)  # the deposed leader wakes and writes
    with pytest.raises(fencelock.LeaseLost):
        old.check()
    seen = client.election(name).leader()
    assert seen is not None
    assert seen.value == "new"
    new.resign()


def test_observe_yields_each_change(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    changes = client.election(name, ttl=3).observe(interval=0.05)
    assert next(changes) is None
    leading = other.election(name, ttl=3).campaign(value="v1")
    seen = next(changes)
    assert seen is not None
    assert (seen.term, seen.value) == (leading.term, "v1")
    leading.resign()
    assert next(changes) is None


def test_bad_values_are_refused(client: fencelock.Client, name: str) -> None:
    with pytest.raises(fencelock.ConfigError, match="too long"):
        client.election(name).campaign(value="x" * 200)
    with pytest.raises(fencelock.ConfigError, match="must be a str"):
        client.election(name).campaign(value=42)  # type: ignore[arg-type]
    assert not client.locked(name)
    with pytest.raises(fencelock.ConfigError, match="lock name"):
        client.election("bad name")


def test_async_election(backend: BackendCase, name: str) -> None:
    async def main() -> None:
        async with (
            fencelock.aconnect(backend.url) as client,
            fencelock.aconnect(backend.url) as other,
        ):
            leading = await client.election(name, ttl=5).campaign(value="ü-node")
            seen = await other.election(name).leader()
            assert seen is not None
            assert (seen.term, seen.value) == (leading.term, "ü-node")
            changes = other.election(name).observe(interval=0.05)
            first = await anext(changes)
            assert first is not None
            assert first.term == leading.term
            await leading.resign()
            assert await anext(changes) is None
            assert isinstance(changes, AsyncGenerator)
            await changes.aclose()

    asyncio.run(main())


def test_run_leads_while_the_function_runs_then_resigns(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    election = client.election(name, ttl=5)
    terms: list[int] = []

    def lead(label: str, *, times: int) -> str:
        seen = other.election(name).leader()
        assert seen is not None
        terms.append(seen.term)
        return label * times

    assert election.run(lead, "ab", times=2) == "abab"
    assert other.election(name).leader() is None  # resigned on return
    with pytest.raises(ValueError, match="inside"):
        election.run(_raises)
    assert other.election(name).leader() is None  # resigned on raise
    assert other.election(name, ttl=5).run(lead, "c", times=1) == "c"
    assert terms[1] > terms[0]


def _raises() -> None:
    raise ValueError("inside")


def test_run_stops_the_function_when_leadership_is_lost(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    started = threading.Event()

    def lead() -> None:
        started.set()
        for _ in range(600):  # 30 s at most: stopped long before
            threading.Event().wait(0.05)

    def depose() -> None:
        assert started.wait(30)
        other.evict(name)  # ends the leader's lease on the server

    threading.Thread(target=depose).start()
    with pytest.raises(fencelock.LeaseLost, match="lost while the block ran"):
        client.election(name, ttl=5).run(lead)


def test_run_with_asyncio(backend: BackendCase, name: str) -> None:
    async def main() -> None:
        async with fencelock.aconnect(backend.url) as client:
            election = client.election(name, ttl=5)

            async def lead(n: int) -> int:
                assert (await election.leader()) is not None
                await asyncio.sleep(0)
                return n + 1

            assert await election.run(lead, 41) == 42
            assert await election.leader() is None

    asyncio.run(main())
