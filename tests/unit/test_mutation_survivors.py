"""Two mutants of the safety code that outlived tests and simulator (docs/safety.md,
"Mutation testing"), each now killed here, on memory:// (no server)."""

from __future__ import annotations

import asyncio

import pytest

import fencelock


def test_a_barrier_party_alone_counts_once_and_does_not_pass() -> None:
    """``while not latch.count_down()`` turned round let one party count every count
    down and pass the barrier alone."""
    with fencelock.connect("memory://mutants-barrier") as client:
        assert client.barrier("b", 3).wait(0.2) is False
        assert client.latch("b").count() == 2  # its one arrival, no more


def test_an_async_barrier_party_alone_counts_once_and_does_not_pass() -> None:
    async def main() -> tuple[bool, int]:
        async with fencelock.aconnect("memory://mutants-abarrier") as client:
            passed = await client.barrier("b", 3).wait(0.2)
            return passed, await client.latch("b").count()

    assert asyncio.run(main()) == (False, 2)


def test_leaving_an_async_block_whose_hold_was_lost_raises_lease_lost() -> None:
    """``if exc is None: raise`` turned round swallowed the failed release of a lost hold:
    the block ended as if its work had been protected."""

    async def main() -> None:
        async with fencelock.aconnect("memory://mutants-blocks") as client:

            async def hold_while_evicted() -> None:
                async with client.semaphore("s", permits=2, ttl=5):
                    for info in await client.list(""):
                        await client.evict(info.name)

            with pytest.raises(fencelock.LeaseLost):  # leaving the block
                await hold_while_evicted()

    asyncio.run(main())
