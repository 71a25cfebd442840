"""Group membership, the same on every backend: members kept alive by a lease, listed
with their data, one live holder per member id, and who joined and left."""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import AsyncGenerator

import pytest

import fencelock
from fencelock.aio import within
from tests.contract.conftest import BackendCase


def test_members_join_with_data_and_leave(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    group, seen_by_other = client.group(name, ttl=5), other.group(name, ttl=5)
    assert group.members() == ()
    first = group.join("worker-1", data="10.0.0.1:8080")
    second = seen_by_other.join("worker-2")  # no data
    members = seen_by_other.members()
    assert [(m.name, m.data) for m in members] == [
        ("worker-1", "10.0.0.1:8080"),
        ("worker-2", None),
    ]
    assert members[0].token == first.token
    assert members[1].token == second.token
    first.leave()
    assert [m.name for m in group.members()] == ["worker-2"]
    with second:
        assert not second.lost
    assert group.members() == ()


def test_one_live_holder_per_member_id(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    held = client.group(name).join("worker-1", data="a")
    with pytest.raises(fencelock.LockTimeout, match="already joined by another client"):
        other.group(name).join("worker-1", data="b")
    held.leave()
    again = other.group(name).join("worker-1", data="b")  # free again: the id is reused
    assert [(m.name, m.data) for m in client.group(name).members()] == [("worker-1", "b")]
    again.leave()


def test_a_member_whose_lease_ends_is_no_longer_listed(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    member = client.group(name, ttl=1).join("worker-1", data="x")
    other.evict(member.lease.name)  # as its TTL would, had its process died
    assert other.group(name).members() == ()
    assert member.wait_lost(30)
    replacement = other.group(name).join("worker-1", data="y")  # evicts the stale data
    assert [(m.name, m.data) for m in client.group(name).members()] == [("worker-1", "y")]
    replacement.leave()


def test_watch_tells_who_joined_and_who_left(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    changes = client.group(name, ttl=3).watch(interval=0.05)
    assert next(changes).members == ()
    one = other.group(name).join("a")
    change = next(changes)
    assert (change.joined, change.left, [m.name for m in change.members]) == (("a",), (), ["a"])
    two = other.group(name).join("b")
    one.leave()
    seen = next(changes)
    while seen.members and [m.name for m in seen.members] != ["b"]:
        seen = next(changes)  # the two changes may be seen apart
    assert [m.name for m in seen.members] == ["b"]
    assert "a" in seen.left
    two.leave()
    assert next(changes).left == ("b",)


def test_asyncio_groups(backend: BackendCase, name: str) -> None:
    async def main() -> None:
        async with fencelock.aconnect(backend.url) as client:
            group = client.group(name, ttl=5)
            async with await group.join("w", data="d") as membership:
                assert [(m.name, m.data) for m in await group.members()] == [("w", "d")]
                assert membership.token > 0
                changes = group.watch(interval=0.05)
                first = await anext(changes)
                assert first.joined == ("w",)
            assert await group.members() == ()

    asyncio.run(main())


def test_a_watch_hears_changes_the_server_pushes(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    """On etcd and ZooKeeper a watcher looks as the server's watch fires: with a
    re-look only every 120 s, each join and leave still arrives within the test."""
    if not client.internals.backend.capabilities.name_watches:
        pytest.skip(f"{client.url} pushes no changes: a watcher polls (docs/primitives.md)")
    changes = client.group(name, ttl=3).watch(interval=120)
    seen: queue.Queue[fencelock.GroupChange] = queue.Queue()

    def follow() -> None:
        for change in changes:
            seen.put(change)
            if not change.members and change.left:
                return

    threading.Thread(target=follow, daemon=True).start()
    assert seen.get(timeout=60).members == ()
    one = other.group(name, ttl=3).join("a", data="x")
    change = seen.get(timeout=60)
    while not change.members:
        change = seen.get(timeout=60)  # the member lease, then its data: one change or two
    assert [(m.name, m.data) for m in change.members] == [("a", "x")]
    assert change.joined == ("a",)
    one.leave()
    change = seen.get(timeout=60)
    assert change.left == ("a",)
    assert change.members == ()


def test_an_asyncio_watch_hears_changes_the_server_pushes(backend: BackendCase, name: str) -> None:
    async def main() -> None:
        async with (
            fencelock.aconnect(backend.url) as client,
            fencelock.aconnect(backend.url) as other,
        ):
            if not client.internals.backend.capabilities.name_watches:
                pytest.skip(f"{client.url} pushes no changes: a watcher polls")
            changes = client.group(name, ttl=3).watch(interval=120)
            assert (await within(60, anext(changes))).members == ()
            membership = await other.group(name, ttl=3).join("b")
            change = await within(60, anext(changes))
            while not change.members:
                change = await within(60, anext(changes))
            assert change.joined == ("b",)
            await membership.leave()
            assert (await within(60, anext(changes))).left == ("b",)
            assert isinstance(changes, AsyncGenerator)
            await changes.aclose()

    asyncio.run(main())
