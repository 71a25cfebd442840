"""Semaphores with a lease per permit, the same on every backend: never more than N
holders, a waiter woken by a release (no polling), a crashed holder's permit back after
its TTL, the permit count fixed while permits are held, a token per permit."""

from __future__ import annotations

import asyncio
import threading

import pytest

import fencelock
from fencelock import clock
from tests.contract.conftest import BackendCase, native_shares, wait_for_queued_entry


def test_at_most_n_permits(client: fencelock.Client, other: fencelock.Client, name: str) -> None:
    sem = client.semaphore(name, permits=2)
    first, second = sem.acquire(timeout=10), other.semaphore(name, permits=2).acquire(timeout=10)
    assert second.token > first.token
    assert sem.available() == 0
    assert other.semaphore(name, permits=2).try_acquire() is None
    with pytest.raises(fencelock.LockTimeout, match="no permit of 2"):
        other.semaphore(name, permits=2).acquire(timeout=0.3)
    first.release()
    assert sem.available() == 1
    third = other.semaphore(name, permits=2).acquire(timeout=10)
    assert third.token > second.token
    second.release()
    third.release()
    assert sem.available() == 2


def test_a_release_wakes_a_waiter(
    backend: BackendCase, client: fencelock.Client, name: str
) -> None:
    held = client.semaphore(name, permits=1, ttl=30).acquire()
    got: list[float] = []

    def wait() -> None:
        with fencelock.connect(backend.url) as waiter:
            permit = waiter.semaphore(name, permits=1, ttl=30).acquire(timeout=60)
            got.append(clock.now())
            permit.release()

    thread = threading.Thread(target=wait)
    thread.start()
    wait_for_queued_entry(client, f"{name}.sem/bell", f"{name}.sem")  # the waiter waits
    released = clock.now()
    held.release()
    thread.join(60)
    assert got, "the waiter never got the permit"
    # woken by the release, not by the 30 s TTL of the permit it waited for
    assert got[0] - released < 10


def test_a_lost_holders_permit_comes_back_after_its_ttl(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    stuck = client.semaphore(name, permits=1, ttl=1).acquire()
    assert other.evict(stuck.lease.name) is not None  # as an operator ends a stuck holder
    assert stuck.lease.wait_lost(15)
    again = other.semaphore(name, permits=1).acquire(timeout=15)
    assert again.token > stuck.token
    again.release()


def test_the_permit_count_is_fixed_while_permits_are_held(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    held = client.semaphore(name, permits=3).acquire()
    with pytest.raises(fencelock.ConfigError, match="in use with 3 permits; asked with 5"):
        other.semaphore(name, permits=5).acquire(timeout=5)
    assert other.semaphore(name, permits=5).available() == 0
    held.release()
    other.semaphore(name, permits=5).acquire(timeout=5).release()  # none held: free to change
    for bad in (0, -1, 1.5, True):
        with pytest.raises(fencelock.ConfigError, match="permits must be an int"):
            client.semaphore(name, permits=bad)  # type: ignore[arg-type]


def test_async_semaphore(backend: BackendCase, name: str) -> None:
    async def main() -> None:
        async with (
            fencelock.aconnect(backend.url) as client,
            fencelock.aconnect(backend.url) as other,
        ):
            async with client.semaphore(name, permits=1) as permit:
                assert await other.semaphore(name, permits=1).try_acquire() is None
                with pytest.raises(fencelock.LockTimeout):  # it waited: not let in
                    await other.semaphore(name, permits=1).acquire(timeout=0.3)
                waiting = asyncio.create_task(other.semaphore(name, permits=1).acquire(timeout=60))
            second = await waiting
            assert second.token > permit.token
            await second.release()
            assert await client.semaphore(name, permits=1).available() == 1

    asyncio.run(main())


def test_permits_reuse_their_slots(client: fencelock.Client, name: str) -> None:
    """A backend keeps a record per name ever used: permits take slots, never new names."""
    if native_shares(client):
        pytest.skip("a native permit is a node in the semaphore's own line: no slots")
    sem = client.semaphore(name, permits=2)
    for _ in range(5):
        sem.acquire(timeout=10).release()
    assert client.inspect(f"{name}.sem/p/2/0") is not None  # the one slot used, reused
    assert client.inspect(f"{name}.sem/p/2/1") is None  # never needed
    assert [i.name for i in client.list(f"{name}.sem/")] == []
