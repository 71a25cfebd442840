"""Read-write locks, the same on every backend: readers share, a writer is alone, a
waiting writer holds off later readers, tokens order readers against writers."""

from __future__ import annotations

import asyncio
import threading

import pytest

import fencelock
from tests.contract.conftest import BackendCase, native_shares, wait_for_queued_entry


def test_readers_share_and_a_writer_waits_for_them(
    backend: BackendCase, client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    with fencelock.connect(backend.url) as third:
        first = client.rw_lock(name).read().acquire(timeout=10)
        second = third.rw_lock(name).read().acquire(timeout=10)  # readers share
        assert second.token > first.token
        with pytest.raises(fencelock.LockTimeout, match="write lock"):
            other.rw_lock(name).write().acquire(timeout=0.3)
        third.rw_lock(name).read().acquire(timeout=10).release()  # the gate was let go
        first.release()
        second.release()
    with other.rw_lock(name).write() as writing:
        assert writing.mode == "write"
        assert writing.token > second.token
        with pytest.raises(fencelock.LockTimeout, match="read lock"):
            client.rw_lock(name).read().acquire(timeout=0.3)
    after = client.rw_lock(name).read().acquire(timeout=10)
    assert after.token > writing.token
    after.release()


def test_a_waiting_writer_is_not_starved_by_later_readers(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    reading = client.rw_lock(name).read().acquire(timeout=10)
    order: list[str] = []
    writer_waits = threading.Event()

    def write() -> None:
        writer_waits.set()
        with other.rw_lock(name, timeout=30).write():
            order.append("writer")

    thread = threading.Thread(target=write)
    thread.start()
    writer_waits.wait(10)
    wait_for_queued_entry(client, f"{name}.rw/gate", f"{name}.rw")  # the writer waits
    with pytest.raises(fencelock.LockTimeout):
        client.rw_lock(name).read().acquire(timeout=0.3)  # a later reader waits behind it
    reading.release()
    thread.join(30)
    with client.rw_lock(name).read() as late:
        order.append("late reader")
        assert late.token > reading.token
    assert order == ["writer", "late reader"]


def test_upgrading_a_read_hold_is_refused(client: fencelock.Client, name: str) -> None:
    rw = client.rw_lock(name)
    with rw.read(), pytest.raises(fencelock.AlreadyHeld, match="release the read lock"):
        rw.write().acquire(timeout=5)
    with rw.write():
        pass  # released: fine now


def test_a_lost_reader_is_told(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    reading = client.rw_lock(name, ttl=1).read().acquire()
    (registration,) = other.list(f"{name}.rw/r/")
    assert other.evict(registration.name) is not None
    assert reading.lease.wait_lost(15)
    assert reading.lost
    with pytest.raises(fencelock.LeaseLost):
        reading.check()
    with pytest.raises(fencelock.LeaseLost):
        reading.release()
    with other.rw_lock(name, timeout=10).write() as writing:  # nothing left behind
        assert writing.token > reading.token


def test_async_rw_lock(backend: BackendCase, name: str) -> None:
    async def main() -> None:
        async with (
            fencelock.aconnect(backend.url) as client,
            fencelock.aconnect(backend.url) as other,
            fencelock.aconnect(backend.url) as third,
        ):
            async with client.rw_lock(name).read() as a, third.rw_lock(name).read() as b:
                assert {a.mode, b.mode} == {"read"}
                with pytest.raises(fencelock.LockTimeout):
                    await other.rw_lock(name).write().acquire(timeout=0.3)
            async with other.rw_lock(name, timeout=10).write() as w:
                assert w.token > max(a.token, b.token)

    asyncio.run(main())


def test_readers_reuse_their_slots(client: fencelock.Client, name: str) -> None:
    """A backend keeps a record per name ever used: readers take slots, never new names."""
    if native_shares(client):
        pytest.skip("a native read is a node in the lock's own line: no slots")
    rw = client.rw_lock(name)
    for _ in range(5):
        rw.read().acquire(timeout=10).release()
    assert client.inspect(f"{name}.rw/r/0") is not None
    assert client.inspect(f"{name}.rw/r/1") is None
