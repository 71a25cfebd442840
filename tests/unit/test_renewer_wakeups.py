"""The renewer sleeps through acquires that do not need it (a wake-up costs more than one)."""

from __future__ import annotations

import asyncio

import pytest

import fencelock
from fencelock import renewal


@pytest.fixture
def renewer_turns(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times a renewer looked at its schedule (once or twice per turn)."""
    looks = [0]
    original = renewal.Schedule.next_due

    def counting(self: renewal.Schedule[fencelock.Lease]) -> float | None:
        looks[0] += 1
        return original(self)

    monkeypatch.setattr(renewal.Schedule, "next_due", counting)
    return looks


def test_the_sync_renewer_is_not_woken_by_each_acquire(renewer_turns: list[int]) -> None:
    with fencelock.connect("memory://renewer-sync") as client:
        lock = client.lock("jobs/1", ttl=30)
        for _ in range(500):
            lock.acquire(timeout=0).release()
    assert renewer_turns[0] < 50, f"{renewer_turns[0]} looks at the schedule for 500 acquires"


def test_the_async_renewer_is_not_woken_by_each_acquire(renewer_turns: list[int]) -> None:
    async def main() -> None:
        async with fencelock.aconnect("memory://renewer-async") as client:
            lock = client.lock("jobs/1", ttl=30)
            for _ in range(500):
                lease = await lock.acquire(timeout=0)
                await lease.release()

    asyncio.run(main())
    assert renewer_turns[0] < 50, f"{renewer_turns[0]} looks at the schedule for 500 acquires"


def test_an_idle_renewer_sleeps_one_tick() -> None:
    schedule: renewal.Schedule[fencelock.Lease] = renewal.Schedule()
    assert renewal.sleep_until(schedule, 100.0) == 100.0 + renewal.IDLE_TICK
