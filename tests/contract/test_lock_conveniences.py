"""What users of other lock libraries reach for, the same on every backend:
``acquire(blocking=False)``, ``owned()``, and a lock as a decorator that serializes calls."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import fencelock
from tests.contract.conftest import BackendCase


def test_blocking_false_tries_once_and_owned_is_this_threads_lease(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    lease = client.lock(name).acquire(blocking=False)
    assert isinstance(lease, fencelock.Lease)
    started = time.monotonic()
    assert other.lock(name, timeout=30).acquire(blocking=False) is None
    assert time.monotonic() - started < 10  # one try, not the lock's 30 s timeout
    with pytest.raises(fencelock.ConfigError, match="tries once and never waits"):
        other.lock(name).acquire(5, blocking=False)  # type: ignore[call-overload]  # on purpose
    lease.release()
    again = other.lock(name).acquire(blocking=False)
    assert again is not None
    assert again.token > lease.token
    again.release()
    # owned(): this thread's live lease through this client
    lock = client.lock(name)
    assert not lock.owned()
    lease = lock.acquire()
    assert lock.owned()
    assert client.lock(name).owned()  # any Lock object of the name
    assert not other.lock(name).owned()  # another client
    seen: list[bool] = []
    thread = threading.Thread(target=lambda: seen.append(lock.owned()))
    thread.start()
    thread.join(30)
    assert seen == [False]  # another thread
    lease.release()
    assert not lock.owned()


def test_a_decorated_function_runs_one_call_at_a_time(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    inside: list[int] = []
    overlaps: list[int] = []
    held_meanwhile: list[bool] = []

    def make(through: fencelock.Client) -> object:
        @through.lock(name)
        def work(n: int) -> int:
            """Work on item n."""
            inside.append(n)
            if len(inside) > 1:
                overlaps.append(n)
            held_meanwhile.append(through.lock(name).owned())
            time.sleep(0.02)
            inside.remove(n)
            return n * 2

        return work

    work_here, work_there = make(client), make(other)
    assert getattr(work_here, "__name__", None) == "work"
    assert getattr(work_here, "__doc__", None) == "Work on item n."
    results: list[int] = []

    def run(work: object, n: int) -> None:
        results.append(work(n))  # type: ignore[operator]

    threads = [
        threading.Thread(target=run, args=(work_here if n % 2 else work_there, n)) for n in range(6)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(results) == [0, 2, 4, 6, 8, 10]
    assert overlaps == []
    assert held_meanwhile == [True] * 6
    assert not other.locked(name)

    @client.lock(name)
    def fails() -> None:
        raise ValueError("inside")

    with pytest.raises(ValueError, match="inside"):
        fails()
    assert not other.locked(name)  # a call that raised gave the lock back


def test_asyncio_acquire_blocking_false_owned_and_decorator(
    backend: BackendCase, name: str
) -> None:
    async def main() -> None:
        async with (
            fencelock.aconnect(backend.url) as client,
            fencelock.aconnect(backend.url) as other,
        ):
            lock = client.lock(name)
            assert not lock.owned()
            lease = await lock.acquire(blocking=False)
            assert lease is not None
            assert lock.owned()
            assert await other.lock(name).acquire(blocking=False) is None
            assert not other.lock(name).owned()

            async def elsewhere() -> bool:
                return lock.owned()

            assert not await asyncio.create_task(elsewhere())  # another task
            await lease.release()
            assert not lock.owned()

            inside: list[int] = []
            overlaps: list[int] = []

            @other.lock(name)
            async def work(n: int) -> int:
                inside.append(n)
                if len(inside) > 1:
                    overlaps.append(n)
                await asyncio.sleep(0.01)
                inside.remove(n)
                return n + 1

            assert sorted(await asyncio.gather(*(work(n) for n in range(5)))) == [1, 2, 3, 4, 5]
            assert overlaps == []
            assert not await client.lock(name).locked()

    asyncio.run(main())


def test_every_lock_like_object_takes_blocking_false_and_try_acquire(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    """A read-write lock's sides, a semaphore and a multi-lock take ``Lock``'s acquire
    arguments: kazoo's ``ReadLock().acquire(blocking=False)`` translates as it is."""
    rw, theirs = client.rw_lock(name), other.rw_lock(name)
    write = rw.write().acquire(blocking=False)
    assert write is not None
    assert theirs.read().acquire(blocking=False) is None
    assert theirs.read().try_acquire() is None
    with pytest.raises(fencelock.ConfigError, match="tries once and never waits"):
        theirs.read().acquire(5, blocking=False)  # type: ignore[call-overload]  # on purpose
    write.release()
    read = theirs.read().acquire(blocking=False)
    assert read is not None
    assert rw.write().try_acquire() is None
    read.release()

    sem, sems = client.semaphore(f"{name}.s", permits=1), other.semaphore(f"{name}.s", permits=1)
    permit = sem.acquire(blocking=False)
    assert permit is not None
    assert sems.acquire(blocking=False) is None
    permit.release()

    multi = other.multi_lock([f"{name}.a", f"{name}.b"])
    held = client.lock(f"{name}.b").acquire()
    assert multi.acquire(blocking=False) is None
    assert multi.try_acquire() is None
    held.release()
    both = multi.acquire(blocking=False)
    assert both is not None
    both.release()


def test_asyncio_lock_like_objects_take_blocking_false(backend: BackendCase, name: str) -> None:
    async def main() -> None:
        async with (
            fencelock.aconnect(backend.url) as client,
            fencelock.aconnect(backend.url) as other,
        ):
            write = await client.rw_lock(name).write().acquire(blocking=False)
            assert write is not None
            assert await other.rw_lock(name).read().acquire(blocking=False) is None
            assert await other.rw_lock(name).read().try_acquire() is None
            await write.release()
            permit = await other.semaphore(f"{name}.s", permits=1).acquire(blocking=False)
            assert permit is not None
            assert await client.semaphore(f"{name}.s", permits=1).try_acquire() is None
            await permit.release()

    asyncio.run(main())
