"""examples/fastapi_app.py, run: one request per order at a time (409 for the second),
the lease given back after the response, and after a cancelled request too."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

import fencelock
from tests.polling import await_until


@pytest.fixture
def url(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> str:
    address = f"sqlite:///{tmp_path}/locks.db"
    monkeypatch.setenv("FENCELOCK_URL", address)
    return address


async def _app_client() -> AsyncIterator[httpx.AsyncClient]:
    from examples.fastapi_app import app

    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://shop") as client:
            yield client


async def _until_locked(url: str, name: str) -> None:
    async with fencelock.aconnect(url) as watcher:
        await await_until(lambda: watcher.locked(name), what=f"{name} locked", interval=0.01)


def test_one_payment_per_order_at_a_time(url: str) -> None:
    async def main() -> None:
        async for http in _app_client():
            slow = asyncio.create_task(http.post("/orders/7/pay", params={"seconds": 2}))
            await _until_locked(url, "orders/7")
            busy = await http.post("/orders/7/pay")
            assert busy.status_code == 409
            assert "being paid" in busy.json()["detail"]
            other = await http.post("/orders/8/pay")  # another order: free
            assert other.status_code == 200
            done = await slow
            assert done.status_code == 200
            assert done.json()["order"] == 7
            again = await http.post("/orders/7/pay")  # given back after the response
            assert again.status_code == 200
            assert again.json()["token"] > done.json()["token"]

    asyncio.run(main())


def test_a_cancelled_request_gives_its_lease_back(url: str) -> None:
    async def main() -> None:
        async for http in _app_client():
            stuck = asyncio.create_task(http.post("/orders/9/pay", params={"seconds": 60}))
            async with fencelock.aconnect(url) as watcher:
                await await_until(
                    lambda: watcher.locked("orders/9"), what="orders/9 locked", interval=0.01
                )
                stuck.cancel()  # the client went away
                with pytest.raises(asyncio.CancelledError):
                    await stuck
                assert not await watcher.locked("orders/9")
            assert (await http.post("/orders/9/pay")).status_code == 200

    asyncio.run(main())
