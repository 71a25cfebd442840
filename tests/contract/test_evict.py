"""A forced release (``client.evict``, ``fencelock release --force``), the same on every
backend: the holder is told its lease is lost, the name is free, the next token is
greater, and evicting a free name changes nothing."""

from __future__ import annotations

import asyncio

import fencelock
from tests.contract.conftest import BackendCase


def test_evict_ends_another_clients_lease(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    lease = client.lock(name, ttl=1.0).acquire()
    evicted = other.evict(name)
    assert evicted is not None
    assert evicted.token == lease.token
    assert evicted.owner == lease.owner
    assert lease.wait_lost(15), "the evicted holder was not told"
    assert lease.lost_reason
    taken = other.lock(name).acquire(timeout=15)
    assert taken.token > lease.token
    taken.release()
    assert other.evict(name) is None  # free: nothing to evict
    assert other.evict(name + "/never") is None


def test_async_evict(backend: BackendCase, name: str) -> None:
    async def main() -> None:
        async with (
            fencelock.aconnect(backend.url) as client,
            fencelock.aconnect(backend.url) as other,
        ):
            lease = await client.lock(name, ttl=1.0).acquire()
            evicted = await other.evict(name)
            assert evicted is not None
            assert evicted.token == lease.token
            assert not await other.locked(name)
            assert await lease.wait_lost(15)
            assert await other.evict(name) is None

    asyncio.run(main())


def test_the_name_is_free_the_moment_evict_returns(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    # MySQL's KILL ends a connection a moment after it returns: the evict waits for it.
    leases = []
    for i in range(20):
        each = f"{name}/{i}"
        leases.append(client.lock(each, ttl=5.0).acquire())
        assert other.evict(each) is not None
        assert not other.locked(each), "evict returned while the name was still held"
    assert all(lease.wait_lost(15) for lease in leases)  # each holder is told, too
