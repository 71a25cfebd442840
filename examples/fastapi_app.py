"""FastAPI with fencelock: a dependency that holds an order's lock for the request.

    FENCELOCK_URL=redis://127.0.0.1:6379/0 uvicorn examples.fastapi_app:app

A second request for the same order while the first holds it gets 409 at once. The
lease is given back when the response is done, and also when the request's task is
cancelled (a client gone, a timeout): ``async with`` leaves on ``CancelledError`` too.
The token goes with the write, for the resource to fence stale ones.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated

from fastapi import Depends, FastAPI, HTTPException, Request

import fencelock


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    async with fencelock.aconnect(os.environ.get("FENCELOCK_URL")) as client:
        app.state.locks = client
        yield


app = FastAPI(lifespan=lifespan)


async def order_lease(order: int, request: Request) -> AsyncIterator[fencelock.AsyncLease]:
    """The order's lease for this request; 409 if another request holds it."""
    client: fencelock.AsyncClient = request.app.state.locks
    lock = client.lock(f"orders/{order}", ttl=10, timeout=0, stop_on_loss=True)
    try:
        lease = await lock.__aenter__()
    except fencelock.LockTimeout:
        raise HTTPException(409, f"order {order} is being paid by another request") from None
    try:
        yield lease
    finally:
        await lock.__aexit__(None, None, None)


@app.post("/orders/{order}/pay")
async def pay(
    order: int, lease: Annotated[fencelock.AsyncLease, Depends(order_lease)], seconds: float = 0
) -> dict[str, int]:
    await asyncio.sleep(seconds)  # the payment provider's call
    return {"order": order, "token": lease.token}
