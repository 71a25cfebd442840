"""``renew_each``: a batch of renewals sent one apiece, all at once on the loop; one
lease's fencelock error is its own outcome, anything else ends the batch."""

from __future__ import annotations

import asyncio

import pytest

import fencelock
from fencelock.backends.base import RenewedAsOf, renew_each


async def renew(name: str, owner: str, ttl: float) -> bool | RenewedAsOf:
    await asyncio.sleep(0.05 if name == "slow" else 0)
    if name == "down":
        raise fencelock.BackendUnavailable("node down")
    if name == "broken":
        raise ValueError("a bug, not an outcome")
    return RenewedAsOf(1.0) if name == "session" else owner == "mine"


def test_each_gets_its_own_outcome_in_order() -> None:
    renewals = [("slow", "mine", 5.0), ("down", "mine", 5.0), ("x", "theirs", 5.0)]
    renewals.append(("session", "mine", 5.0))
    outcomes = asyncio.run(renew_each(renew, renewals))
    assert outcomes[0] is True
    assert outcomes[2] is False
    assert outcomes[3] == RenewedAsOf(1.0)
    assert isinstance(outcomes[1], fencelock.BackendUnavailable)


def test_an_error_that_is_no_outcome_ends_the_batch() -> None:
    with pytest.raises(ValueError, match="a bug"):
        asyncio.run(renew_each(renew, [("x", "mine", 5.0), ("broken", "mine", 5.0)]))


def test_they_are_sent_together_not_one_after_another() -> None:
    async def timed() -> float:
        loop = asyncio.get_running_loop()
        started = loop.time()
        await renew_each(renew, [("slow", "mine", 5.0)] * 20)
        return loop.time() - started

    assert asyncio.run(timed()) < 0.05 * 20 / 2  # twenty 50 ms renewals overlap
