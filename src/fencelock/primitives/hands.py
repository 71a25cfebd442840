"""The leases one run of a primitive's flow takes and gives back, by name.

The flows (multi-lock, read-write lock, semaphore) ask to take a name, give it back,
and list what is held under a prefix; these are those three steps, once per colour,
with the token of each take kept and everything still taken given back quietly when
the run fails.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

from fencelock.backends.base import LockInfo
from fencelock.engine.steps import Give, Holding, Take
from fencelock.errors import FencelockError, LockTimeout
from fencelock.lease import AsyncLease, Lease
from fencelock.primitives.client_like import AsyncClientLike, ClientLike


def holdings(infos: Iterable[LockInfo]) -> tuple[Holding, ...]:
    """The held leases among ``infos``, as the reply to a ``ListHeld`` step lists them."""
    return tuple(Holding(info.name, info.remaining) for info in infos if info.held)


class Hands:
    """Takes and gives back leases for one flow run (sync API)."""

    def __init__(self, client: ClientLike, ttl: float, renew: bool = True) -> None:
        self.client, self.ttl, self.renew = client, ttl, renew
        self.taken: dict[str, Lease] = {}  # in the order taken
        self.tokens: dict[str, int] = {}  # the token of every take, given back or not

    def take(self, name: str, timeout: float | None) -> bool:
        """Acquire ``name`` within ``timeout``; False if another owner kept it."""
        try:
            lease = self.client.lock(name, ttl=self.ttl, renew=self.renew).acquire(timeout)
        except LockTimeout:
            return False
        self.taken[name], self.tokens[name] = lease, lease.token
        return True

    def give(self, name: str) -> None:
        self.taken.pop(name).release()

    def step(self, op: Take | Give) -> bool:
        """Carry out a flow's take or give; whether it was granted (a give always is)."""
        if isinstance(op, Take):
            return self.take(op.name, op.timeout)
        self.give(op.name)
        return True

    def held(self, prefix: str) -> tuple[Holding, ...]:
        """The leases held under ``prefix`` now, by anyone."""
        return holdings(self.client.list(prefix))

    def give_back_all(self) -> None:
        """Release what is still taken, newest first; a failure leaves it to its TTL."""
        for name in reversed(list(self.taken)):
            with contextlib.suppress(FencelockError):
                self.give(name)


class AsyncHands:
    """Takes and gives back leases for one flow run (asyncio API); as :class:`Hands`."""

    def __init__(self, client: AsyncClientLike, ttl: float, renew: bool = True) -> None:
        self.client, self.ttl, self.renew = client, ttl, renew
        self.taken: dict[str, AsyncLease] = {}
        self.tokens: dict[str, int] = {}

    async def take(self, name: str, timeout: float | None) -> bool:
        try:
            lock = self.client.lock(name, ttl=self.ttl, renew=self.renew)
            lease = await lock.acquire(timeout)
        except LockTimeout:
            return False
        self.taken[name], self.tokens[name] = lease, lease.token
        return True

    async def give(self, name: str) -> None:
        await self.taken.pop(name).release()

    async def step(self, op: Take | Give) -> bool:
        """As :meth:`Hands.step`."""
        if isinstance(op, Take):
            return await self.take(op.name, op.timeout)
        await self.give(op.name)
        return True

    async def held(self, prefix: str) -> tuple[Holding, ...]:
        return holdings(await self.client.list(prefix))

    async def give_back_all(self) -> None:
        for name in reversed(list(self.taken)):
            with contextlib.suppress(FencelockError):
                await self.give(name)
