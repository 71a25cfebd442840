"""How a lease ends, the same on every backend: release after a loss, releasing
twice, a forgotten lease at close, a holder asking again for its own lock, and the
conveniences users migrating from other libraries reach for first."""

from __future__ import annotations

import asyncio
import logging
import os
import threading

import pytest

import fencelock
from fencelock import clock
from tests.contract.conftest import BackendCase, wait_for_waiters


def lost_lease(client: fencelock.Client, name: str) -> fencelock.Lease:
    lease = client.lock(name, ttl=0.2, renew=False).acquire()
    assert lease.wait_lost(5)
    return lease


def test_release_after_a_loss_raises_once_then_is_a_no_op(
    client: fencelock.Client, name: str
) -> None:
    lease = lost_lease(client, name)
    with pytest.raises(fencelock.LeaseLost, match="lost before release"):
        lease.release()
    lease.release()  # the second release says nothing and sends nothing
    assert not client.held()


def test_release_twice_is_a_no_op(client: fencelock.Client, name: str) -> None:
    lease = client.lock(name).acquire()
    lease.release()
    lease.release()
    assert lease.released


def test_a_forgotten_lease_is_released_when_the_client_closes(
    backend: BackendCase, other: fencelock.Client, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    client = fencelock.connect(backend.url)
    kept = client.lock(name + "/kept", ttl=30).acquire()
    dropped = client.lock(name + "/dropped", ttl=30).acquire()
    kept.release()
    assert client.held() == [dropped]
    del dropped
    with caplog.at_level(logging.WARNING, logger="fencelock"):
        client.close()
    assert any(
        "never released" in r.getMessage() and name + "/dropped" in r.getMessage()
        for r in caplog.records
    )
    assert not other.locked(name + "/dropped")  # released, not left for its TTL


def test_held_lists_live_leases_only(client: fencelock.Client, name: str) -> None:
    a = client.lock(name + "/a").acquire()
    lost = lost_lease(client, name + "/b")
    assert client.held() == [a]
    a.release()
    with pytest.raises(fencelock.LeaseLost):
        lost.release()
    assert client.held() == []


def test_a_thread_asking_again_for_its_own_lock_is_told_at_once(
    client: fencelock.Client, name: str
) -> None:
    lock = client.lock(name)
    with lock:
        started = clock.now()
        with pytest.raises(fencelock.AlreadyHeld, match="would wait for itself"):
            client.lock(name).acquire(timeout=30)
        with pytest.raises(fencelock.AlreadyHeld):
            lock.try_acquire()
        assert clock.now() - started < 5  # no waiting for itself (30 s)
    with lock:  # released: the same thread may take it again
        pass


def test_another_thread_of_the_same_client_waits_its_turn(
    client: fencelock.Client, name: str
) -> None:
    lock = client.lock(name, timeout=10)
    order: list[str] = []
    lease = lock.acquire()

    def second() -> None:
        with lock:  # one Lock object shared by two threads
            order.append("second")

    thread = threading.Thread(target=second)
    thread.start()
    wait_for_waiters(client, name)  # the second thread waits: it is not told AlreadyHeld
    order.append("first")
    lease.release()
    thread.join(10)
    assert order == ["first", "second"]


def test_try_acquire_and_locked(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    lock = client.lock(name)
    assert not lock.locked()
    lease = lock.try_acquire()
    assert lease is not None
    assert other.lock(name).try_acquire() is None
    assert lock.locked()
    assert other.locked(name)
    lease.release()
    assert not other.locked(name)


def test_async_endings(backend: BackendCase, name: str) -> None:
    async def main() -> None:
        async with (
            fencelock.aconnect(backend.url) as client,
            fencelock.aconnect(backend.url) as other,
        ):
            lock = client.lock(name)
            lease = await lock.try_acquire()
            assert lease is not None
            assert await lock.locked()
            assert await other.lock(name).try_acquire() is None
            with pytest.raises(fencelock.AlreadyHeld):
                await lock.acquire(timeout=5)
            assert client.held() == [lease]
            await lease.release()
            await lease.release()
            assert not await other.locked(name)

    asyncio.run(main())


def test_async_wait_lost_does_not_block_the_loop(backend: BackendCase, name: str) -> None:
    """It used to block the event loop for its whole timeout and then return False."""

    async def main() -> tuple[bool, float, int]:
        async with fencelock.aconnect(backend.url) as client:
            lease = await client.lock(name, ttl=0.2, renew=False).acquire()
            ticks = 0

            async def ticker() -> None:
                nonlocal ticks
                while True:
                    await asyncio.sleep(0.01)
                    ticks += 1

            task = asyncio.ensure_future(ticker())
            started = clock.now()
            lost = await lease.wait_lost(5)
            took = clock.now() - started
            task.cancel()
            with pytest.raises(fencelock.LeaseLost):
                await lease.release()
            return lost, took, ticks

    lost, took, ticks = asyncio.run(main())
    assert lost
    assert took < 4
    # The loop ran other tasks while it waited (a wait that blocked it ran nothing for its
    # whole length). A loss heard at once leaves no time to tick: a loaded machine can
    # hear it so, and a count of ticks would be a count of the machine's spare time.
    assert ticks > 0 or took < 0.5, f"the loop ran nothing in {took:.2f}s of waiting"


def test_async_release_after_loss_raises_lease_lost(backend: BackendCase, name: str) -> None:
    async def main() -> None:
        async with fencelock.aconnect(backend.url) as client:
            lease = await client.lock(name, ttl=0.2, renew=False).acquire()
            assert await lease.wait_lost(5)
            with pytest.raises(fencelock.LeaseLost):
                await lease.release()
            await lease.release()

    asyncio.run(main())


def test_a_forked_child_cannot_release_its_parents_lease(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    lease = client.lock(name).acquire()
    pid = os.fork()
    if pid == 0:  # the child: refuse, and leave the parent's lease alone
        code = 1
        try:
            assert lease.lost
            assert not client.held()
            lease.release()
        except fencelock.LeaseLost:
            code = 0
        except BaseException:
            code = 2
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert not lease.lost
    assert other.locked(name)
    info = client.inspect(name)
    assert info is not None
    assert info.owner == lease.owner
    lease.release()
