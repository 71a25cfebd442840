"""An asyncio acquire cancelled while its try is in flight leaves nothing held.

The try may already have taken the lease (a pool thread finishing it, a script the
server ran) when the task is cancelled: nobody will ever hold a ``Lease`` for it, so
the backend must give it back, or the name stays taken for the whole TTL.
"""

from __future__ import annotations

import asyncio

import fencelock
from tests.contract.conftest import BackendCase

ROUNDS = 150
MAX_YIELDS = 6  # cancel after 0..5 turns of the loop: before, during and after the try


async def cancel_one(lock: fencelock.AsyncLock, yields: int) -> bool:
    """Start an acquire, cancel it after ``yields`` turns; True if the cancel landed."""
    task = asyncio.ensure_future(lock.acquire(timeout=5))
    for _ in range(yields):
        await asyncio.sleep(0)
    task.cancel()
    try:
        lease = await task
    except asyncio.CancelledError:
        return True
    await lease.release()  # it finished before the cancel: an ordinary acquisition
    return False


def test_cancelled_acquire_leaves_the_name_free(backend: BackendCase, name: str) -> None:
    async def main() -> int:
        async with fencelock.aconnect(backend.url) as client:
            lock = client.lock(name, ttl=30)
            landed = 0
            for i in range(ROUNDS):
                landed += await cancel_one(lock, i % MAX_YIELDS)
                info = await client.inspect(name)
                assert info is None or not info.held, (
                    f"after cancel #{i} ({i % MAX_YIELDS} turns): {info.owner} holds the "
                    f"lease ({info.remaining}s left) and no Lease exists for it"
                )
            return landed

    landed = asyncio.run(main())
    assert landed > ROUNDS // 2, f"only {landed} of {ROUNDS} cancellations landed"


def test_a_cancelled_acquire_leaves_the_clients_other_leases_alone(
    backend: BackendCase, name: str
) -> None:
    """Cancelling one acquire (``asyncio.wait_for`` around it, say) costs nothing
    else: a lease the same client holds on another name stays held, wherever the
    cancel lands (a backend that shares one session among leases must not end it)."""

    async def main() -> None:
        async with fencelock.aconnect(backend.url) as client:
            kept = await client.lock(name + "/kept", ttl=30).acquire()
            lock = client.lock(name, ttl=30)
            for i in range(60):
                await cancel_one(lock, i % MAX_YIELDS)
                assert not kept.lost, f"after cancel #{i}: {kept.lost_reason}"
            assert (await client.inspect(name + "/kept")).owner == kept.owner  # type: ignore[union-attr]
            await kept.release()

    asyncio.run(main())
