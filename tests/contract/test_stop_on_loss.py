"""The protected work stops when its lease is lost, and max_hold caps a lease: every backend.

A loss here is what it is in production: another owner took the lease (the server
expired it while we were cut off, then gave it away), or this process was paused past
the lease's TTL. Bounds are generous (seconds) against blocks that would otherwise run
for a minute, so a loaded machine cannot fail them, and a missing stop always does.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Awaitable, Callable

import pytest

import fencelock
from fencelock import clock
from fencelock.lease import LeaseBase
from fencelock.stopping import LossInterrupt
from tests.contract.conftest import BackendCase

TTL = 1.5  # renewed every 0.5 s
FOREVER = 60.0  # how long a block would run if nothing stopped it
PROMPTLY = 10.0  # a stop must come well within this (one renewal interval is 0.5 s)


def steal(url: str, lease: LeaseBase) -> None:
    """Another client takes the lease away, as after an expiry the holder did not see,
    and gives it back (closed: a ZooKeeper client left open reconnects forever)."""
    with fencelock.connect(url) as thief:
        assert thief.internals.backend.release(lease.name, lease.owner)
        thief.lock(lease.name, ttl=30).acquire(timeout=10).release()


async def stolen_while(
    backend: BackendCase, name: str, work: Callable[[], Awaitable[None]]
) -> tuple[BaseException, float]:
    """Run ``work`` under a stop_on_loss lock, steal the lease; what leaving raised, and
    how long after the theft began (a backend may see the loss before the thief is
    done: ending a PostgreSQL session is seen by its holder at once)."""
    stolen_at = 0.0
    async with fencelock.aconnect(backend.url) as client:
        lock = client.lock(name, ttl=TTL, stop_on_loss=True)
        try:
            async with lock as lease:
                loop = asyncio.get_running_loop()
                task = asyncio.ensure_future(work())
                stolen_at = clock.now()
                thief = loop.run_in_executor(None, steal, backend.url, lease)
                await asyncio.wait_for(asyncio.shield(thief), PROMPTLY)
                await task
        except BaseException as exc:
            return exc, clock.now() - stolen_at
    raise AssertionError("the block ran to its end: nothing stopped it")


def test_async_block_awaiting_io_is_cancelled_when_the_lease_is_taken(
    backend: BackendCase, name: str
) -> None:
    async def main() -> tuple[BaseException, float]:
        accepted: list[asyncio.StreamWriter] = []  # the silent side, closed at the end
        silent = await asyncio.start_server(lambda r, w: accepted.append(w), "127.0.0.1", 0)
        port = silent.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)

        async def read_forever() -> None:
            await asyncio.wait_for(reader.read(1), FOREVER)  # I/O that never completes

        try:
            return await stolen_while(backend, name, read_forever)
        finally:
            for end in (writer, *accepted):
                end.close()
            silent.close()

    raised, after = asyncio.run(main())
    assert isinstance(raised, fencelock.LeaseLost), repr(raised)
    assert "lost while the block ran" in str(raised)
    assert "another owner" in str(raised)
    assert isinstance(raised.__cause__, asyncio.CancelledError)
    assert after < PROMPTLY


def test_async_block_is_cancelled_once_a_pause_outlived_the_lease(
    backend: BackendCase, name: str
) -> None:
    """A pause (a long GC, a blocking call on the loop) past the TTL: the renewer finds
    the lease lost the moment the loop runs again, and stops the block."""

    async def main() -> tuple[BaseException, float]:
        resumed = 0.0
        async with fencelock.aconnect(backend.url) as client:
            try:
                async with client.lock(name, ttl=TTL, stop_on_loss=True):
                    time.sleep(TTL + 0.5)  # noqa: ASYNC251 (the whole loop stands still)
                    resumed = clock.now()
                    await asyncio.sleep(FOREVER)
            except BaseException as exc:
                return exc, clock.now() - resumed
        raise AssertionError("the block ran to its end")

    raised, after = asyncio.run(main())
    assert isinstance(raised, fencelock.LeaseLost), repr(raised)
    assert "not renewed within its TTL" in str(raised) or "ran out" in str(raised)
    assert after < PROMPTLY


def test_an_outer_cancellation_stays_a_cancellation(backend: BackendCase, name: str) -> None:
    async def main() -> None:
        async with fencelock.aconnect(backend.url) as client:
            entered = asyncio.Event()

            async def hold() -> None:
                async with client.lock(name, ttl=TTL, stop_on_loss=True):
                    entered.set()
                    await asyncio.sleep(FOREVER)

            task = asyncio.ensure_future(hold())
            await asyncio.wait_for(entered.wait(), PROMPTLY)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert not await client.locked(name)  # released on the way out
            assert client.held() == []

    asyncio.run(main())


@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.TaskGroup is Python 3.11+")
def test_a_task_group_inside_the_block_is_cancelled_with_it(
    backend: BackendCase, name: str
) -> None:
    cancelled: list[int] = []

    async def child(number: int) -> None:
        try:
            await asyncio.sleep(FOREVER)
        except asyncio.CancelledError:
            cancelled.append(number)
            raise

    async def group() -> None:
        async with asyncio.TaskGroup() as tasks:  # type: ignore[attr-defined]
            for number in range(3):
                tasks.create_task(child(number))

    raised, after = asyncio.run(stolen_while(backend, name, group))
    assert isinstance(raised, fencelock.LeaseLost), repr(raised)
    assert sorted(cancelled) == [0, 1, 2]
    assert after < PROMPTLY


def test_lost_event_tells_worker_threads(
    client: fencelock.Client, backend: BackendCase, name: str
) -> None:
    lease = client.lock(name, ttl=TTL).acquire()
    steps: list[int] = []

    def worker() -> None:
        while not lease.lost_event.wait(0.05):
            steps.append(1)

    thread = threading.Thread(target=worker)
    thread.start()
    steal(backend.url, lease)
    thread.join(PROMPTLY)
    assert not thread.is_alive()
    assert lease.lost
    assert lease.lost_event.is_set()
    with pytest.raises(fencelock.LeaseLost):
        lease.release()


def test_stop_on_loss_interrupts_the_holding_thread(
    client: fencelock.Client, backend: BackendCase, name: str
) -> None:
    outcome: list[BaseException] = []
    entered = threading.Event()

    def batch_job() -> None:
        try:
            with client.lock(name, ttl=TTL, stop_on_loss=True):
                entered.set()
                deadline = clock.now() + FOREVER
                while clock.now() < deadline:  # a batch job that never calls check()
                    sum(range(1000))
                    time.sleep(0.001)  # its I/O; lets the GIL go to the other threads
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=batch_job)
    thread.start()
    assert entered.wait(PROMPTLY)
    (lease,) = client.held()
    steal(backend.url, lease)
    thread.join(PROMPTLY)
    assert not thread.is_alive()
    (raised,) = outcome
    assert type(raised) is fencelock.LeaseLost, repr(raised)
    assert isinstance(raised.__cause__, LossInterrupt)
    assert "the block was stopped" in str(raised)


def test_a_block_left_in_time_is_never_interrupted_later(
    client: fencelock.Client, name: str
) -> None:
    with client.lock(name, ttl=0.3, renew=False, stop_on_loss=True) as lease:
        pass
    time.sleep(0.6)  # the lease's TTL passes after the block ended: nothing may fire
    assert lease.released
    assert not lease.lost


def test_max_hold_ends_a_renewed_lease(client: fencelock.Client, name: str) -> None:
    lock = client.lock(name, ttl=0.6, max_hold=1.5)
    started = clock.now()
    lease = lock.acquire()
    assert lease.wait_lost(PROMPTLY)
    held = clock.now() - started
    assert "max_hold" in (lease.lost_reason or ""), lease.lost_reason
    assert held >= 1.5 - 0.05  # renewed past its 0.6 s TTL until max_hold, not after
    with pytest.raises(fencelock.LeaseLost, match="max_hold"):
        lease.release()


def test_extend_never_trusts_past_max_hold(client: fencelock.Client, name: str) -> None:
    lease = client.lock(name, ttl=5, max_hold=2).acquire()
    lease.extend(60)
    assert lease.remaining() <= 2
    lease.release()


def test_async_max_hold(backend: BackendCase, name: str) -> None:
    async def main() -> str | None:
        async with fencelock.aconnect(backend.url) as client:
            lease = await client.lock(name, ttl=0.6, max_hold=1.2).acquire()
            assert await lease.wait_lost(PROMPTLY)
            return lease.lost_reason

    assert "max_hold" in (asyncio.run(main()) or "")


@pytest.mark.parametrize("bad", [0, -1, "10"])
def test_max_hold_must_be_seconds(client: fencelock.Client, name: str, bad: object) -> None:
    with pytest.raises(fencelock.ConfigError, match="max_hold"):
        client.lock(name, max_hold=bad)  # type: ignore[arg-type]
