"""The renewer sleeps through acquires that do not need it (a wake-up costs more than one)."""

from __future__ import annotations

import asyncio

import fencelock
from fencelock.engine import renewal
from fencelock.renewer import AsyncRenewer, Renewer


def count_looks(renewer: Renewer | AsyncRenewer) -> list[int]:
    """Count how often this renewer looks at its schedule (once or twice a turn).

    Only this client's renewer: other clients' renewers in the test process tick too.
    """
    looks = [0]
    schedule = renewer._schedule
    original = schedule.next_due

    def counting() -> float | None:
        looks[0] += 1
        return original()

    schedule.next_due = counting  # type: ignore[method-assign]
    return looks


def test_the_sync_renewer_is_not_woken_by_each_acquire() -> None:
    with fencelock.connect("memory://renewer-sync") as client:
        looks = count_looks(client._renewer)
        lock = client.lock("jobs/1", ttl=30)
        for _ in range(500):
            lock.acquire(timeout=0).release()
    assert looks[0] < 50, f"{looks[0]} looks at the schedule for 500 acquires"


def test_the_async_renewer_is_not_woken_by_each_acquire() -> None:
    async def main() -> int:
        async with fencelock.aconnect("memory://renewer-async") as client:
            looks = count_looks(client._renewer)
            lock = client.lock("jobs/1", ttl=30)
            for _ in range(500):
                lease = await lock.acquire(timeout=0)
                await lease.release()
            return looks[0]

    looks = asyncio.run(main())
    assert looks < 50, f"{looks} looks at the schedule for 500 acquires"


def test_an_idle_renewer_sleeps_one_tick() -> None:
    schedule: renewal.Schedule[fencelock.Lease] = renewal.Schedule()
    assert schedule.wake_at(100.0) == 100.0 + renewal.IDLE_TICK
