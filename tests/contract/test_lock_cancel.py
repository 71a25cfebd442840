"""``lock.cancel()`` ends a pending acquire from another thread or task (kazoo's
``Lock.cancel``): it raises :class:`AcquireCancelled`, leaves nothing held or queued,
and a cancel with nothing pending changes nothing.

The canceller calls ``cancel()`` again and again until the acquire ends: an acquire
that has not registered yet is not missed, and nothing depends on how long a try takes.
"""

from __future__ import annotations

import asyncio
import threading
import time

import fencelock
from tests.contract.conftest import BackendCase

PATIENCE = 60  # the waiter's own timeout: only a cancel ends it sooner


def test_cancel_ends_a_waiting_acquire_from_another_thread(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    held = client.lock(name).acquire()
    waiting = other.lock(name)
    outcome: list[BaseException | fencelock.Lease] = []

    def acquire() -> None:
        try:
            outcome.append(waiting.acquire(timeout=PATIENCE))
        except BaseException as exc:  # what the test asserts on
            outcome.append(exc)

    thread = threading.Thread(target=acquire)
    started = time.monotonic()
    thread.start()
    while thread.is_alive() and time.monotonic() - started < PATIENCE:
        waiting.cancel()
        thread.join(0.05)
    assert len(outcome) == 1
    assert isinstance(outcome[0], fencelock.AcquireCancelled), outcome
    assert isinstance(outcome[0], fencelock.LockTimeout)  # handled where giving up is
    assert time.monotonic() - started < PATIENCE / 2
    assert not waiting.owned()
    # nothing of the cancelled waiter is left in the line: once the holder is gone,
    # a single try gets the lock
    held.release()
    again = other.lock(name).acquire(blocking=False)
    assert again is not None
    assert again.token > held.token
    again.release()


def test_cancel_with_nothing_pending_changes_nothing(client: fencelock.Client, name: str) -> None:
    lock = client.lock(name)
    lock.cancel()
    with lock as lease:  # a cancel reaches only the acquires under way when it is made
        lock.cancel()
        assert lock.owned()
        lease.check()


def test_cancel_ends_a_waiting_task_which_goes_on(backend: BackendCase, name: str) -> None:
    async def main() -> None:
        async with (
            fencelock.aconnect(backend.url) as first,
            fencelock.aconnect(backend.url) as second,
        ):
            held = await first.lock(name).acquire()
            waiting = second.lock(name)

            async def acquire() -> str:
                try:
                    await waiting.acquire(timeout=PATIENCE)
                except fencelock.AcquireCancelled:
                    await asyncio.sleep(0)  # the task itself was not cancelled
                    return "cancelled"
                return "acquired"

            task = asyncio.ensure_future(acquire())
            started = time.monotonic()
            while not task.done() and time.monotonic() - started < PATIENCE:
                waiting.cancel()
                await asyncio.wait({task}, timeout=0.05)
            assert await task == "cancelled"
            cancelling = getattr(task, "cancelling", None)
            assert cancelling is None or cancelling() == 0
            await held.release()
            again = await second.lock(name).acquire(blocking=False)
            assert again is not None
            assert again.token > held.token
            await again.release()

    asyncio.run(main())


def test_a_cancelled_acquire_raises_in_with(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    lock = other.lock(name, timeout=PATIENCE)
    ran: list[bool] = []
    errors: list[BaseException] = []

    def enter() -> None:
        try:
            with lock:
                ran.append(True)
        except fencelock.AcquireCancelled as exc:
            errors.append(exc)

    with client.lock(name):
        thread = threading.Thread(target=enter)
        thread.start()
        started = time.monotonic()
        while thread.is_alive() and time.monotonic() - started < PATIENCE:
            lock.cancel()
            thread.join(0.05)
    assert ran == []
    assert len(errors) == 1
    assert name in str(errors[0])
    assert "cancel" in str(errors[0])


def test_cancel_of_one_lock_object_leaves_another_alone(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    held = client.lock(name).acquire()
    cancelled, untouched = other.lock(name), other.lock(name)
    results: dict[str, object] = {}

    def acquire(key: str, lock: fencelock.Lock) -> None:
        try:
            results[key] = lock.acquire(timeout=PATIENCE)
        except fencelock.LockTimeout as exc:
            results[key] = exc

    first = threading.Thread(target=acquire, args=("cancelled", cancelled))
    second = threading.Thread(target=acquire, args=("untouched", untouched))
    first.start()
    second.start()
    started = time.monotonic()
    while first.is_alive() and time.monotonic() - started < PATIENCE:
        cancelled.cancel()
        first.join(0.05)
    assert isinstance(results["cancelled"], fencelock.AcquireCancelled)
    assert second.is_alive()  # still waiting for the holder
    held.release()
    second.join(PATIENCE)
    lease = results["untouched"]
    assert isinstance(lease, fencelock.Lease)
    assert lease.token > held.token
    lease.release()
