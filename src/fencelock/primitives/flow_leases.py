"""Running a primitive's flow, and the leases one run takes and gives back, by name.

A flow (multi-lock, read-write lock, semaphore, latch) yields steps and receives their
replies; :func:`run_flow` is that loop, once per sync/async variant. The multi-lock, read-write lock
and semaphore flows ask to take a name, give it back, and list what is held under a
prefix: :class:`FlowLeases` carries those out, with the token of each take kept and
everything still taken given back quietly when the run fails.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Generator, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from fencelock import clock
from fencelock.backends.base import LockInfo
from fencelock.engine.operations import Give, Holding, ListHeld, Reply, Take
from fencelock.errors import FencelockError, LockTimeout
from fencelock.lease import AsyncLease, Lease
from fencelock.primitives.client_like import AsyncClientLike, ClientLike

R = TypeVar("R")
Rp = TypeVar("Rp", bound=Reply)
# A flow's steps differ by primitive (each carries out its own as well as the shared ones)
Flow = Generator[Any, Rp, R]


@dataclass(frozen=True)
class _Returned(Generic[R]):
    value: R


def _advance(flow: Flow[Rp, R], reply: Rp | None) -> Any:
    """The flow's next step after ``reply`` (None: its first), or what it returned."""
    try:
        return next(flow) if reply is None else flow.send(reply)
    except StopIteration as done:
        return _Returned(done.value)


def run_flow(flow: Flow[Rp, R], carry_out: Callable[[Any], Rp]) -> R:
    """Carry out each step ``flow`` yields, sending it the reply, until it returns."""
    step = _advance(flow, None)
    while not isinstance(step, _Returned):
        step = _advance(flow, carry_out(step))
    returned: _Returned[R] = step
    return returned.value


async def arun_flow(flow: Flow[Rp, R], carry_out: Callable[[Any], Awaitable[Rp]]) -> R:
    """:func:`run_flow` for asyncio."""
    step = _advance(flow, None)
    while not isinstance(step, _Returned):
        step = _advance(flow, await carry_out(step))
    returned: _Returned[R] = step
    return returned.value


def holdings(infos: Iterable[LockInfo]) -> tuple[Holding, ...]:
    """The held leases among ``infos``, as the reply to a ``ListHeld`` step lists them."""
    return tuple(Holding(info.name, info.remaining, info.owner) for info in infos if info.held)


class FlowLeases:
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

    def run(self, flow: Flow[Reply, R], other: Callable[[Any], Reply] | None = None) -> R:
        """Run ``flow``: its takes, gives and listings here, any other step by ``other``;
        if the run fails, everything still taken is given back."""
        try:
            return run_flow(flow, lambda step: self._carry_out(step, other))
        except BaseException:
            self.give_back_all()
            raise

    def _carry_out(self, step: object, other: Callable[[Any], Reply] | None) -> Reply:
        if isinstance(step, Take):
            return Reply(clock.now(), granted=self.take(step.name, step.timeout))
        if isinstance(step, Give):
            self.give(step.name)
            return Reply(clock.now())
        if isinstance(step, ListHeld):
            return Reply(clock.now(), held=holdings(self.client.list(step.prefix)))
        if other is None:
            raise TypeError(f"no one carries out {step!r}")
        return other(step)

    def give_back_all(self) -> None:
        """Release what is still taken, newest first; a failure leaves it to its TTL."""
        for name in reversed(list(self.taken)):
            with contextlib.suppress(FencelockError):
                self.give(name)


class AsyncFlowLeases:
    """Takes and gives back leases for one flow run (asyncio API); as :class:`FlowLeases`."""

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

    async def run(
        self, flow: Flow[Reply, R], other: Callable[[Any], Awaitable[Reply]] | None = None
    ) -> R:
        """As :meth:`FlowLeases.run`."""
        try:
            return await arun_flow(flow, lambda step: self._carry_out(step, other))
        except BaseException:
            await self.give_back_all()
            raise

    async def _carry_out(
        self, step: object, other: Callable[[Any], Awaitable[Reply]] | None
    ) -> Reply:
        if isinstance(step, Take):
            return Reply(clock.now(), granted=await self.take(step.name, step.timeout))
        if isinstance(step, Give):
            await self.give(step.name)
            return Reply(clock.now())
        if isinstance(step, ListHeld):
            return Reply(clock.now(), held=holdings(await self.client.list(step.prefix)))
        if other is None:
            raise TypeError(f"no one carries out {step!r}")
        return await other(step)

    async def give_back_all(self) -> None:
        for name in reversed(list(self.taken)):
            with contextlib.suppress(FencelockError):
                await self.give(name)
