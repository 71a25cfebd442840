"""Count-down latches (Redisson's RCountDownLatch): count down from N; waiters wake at
zero; the count lives on the server, so it survives the crash of any client.

The flows are :mod:`fencelock.engine.latch`'s; the drivers here perform their ops.
A latch needs unrenewed leases that outlive their client (``Backend.outlives_client``),
or a backend that keeps latches itself (ZooKeeper: a persistent node).
"""

from __future__ import annotations

import contextlib
from typing import Generic, Protocol, TypeVar

from fencelock import clock
from fencelock.backends.base import (
    AsyncNativeLatch,
    LockInfo,
    NativeLatch,
    async_latching,
    holds_latches,
    latching,
)
from fencelock.engine.latch import (
    Evict,
    Held,
    LatchFlow,
    LatchNames,
    Leave,
    Op,
    Reply,
    Take,
    count_down_flow,
    set_count_flow,
    validate_count,
    wait_flow,
)
from fencelock.engine.names import validate_name
from fencelock.engine.operations import ListHeld
from fencelock.engine.timing import MAX_TTL, validate_timeout
from fencelock.errors import ConfigError, FencelockError, LockTimeout
from fencelock.lease import AsyncLease, Lease
from fencelock.primitives.client_like import AsyncClientLike, ClientLike
from fencelock.primitives.flow_leases import arun_flow, holdings, run_flow

LASTING = 86_400.0  # a lease with more than this left was left to last (a year)
BRIEF_TTL = 5.0  # a waiter's hold of ``closed``, given straight back


def _refuse(holds: bool, name: str, url: str) -> None:
    if not holds:
        raise ConfigError(
            f"latch {name!r}: a latch's count must outlive the clients that set it and "
            f"wake its waiters at zero, and on {url.split('://', 1)[0]}:// nothing does both "
            "(a lease ends with its connection, and nothing rings when a kept name is let "
            "go; see docs/backends.md)"
        )


N = TypeVar("N", NativeLatch, AsyncNativeLatch)
N_co = TypeVar("N_co", covariant=True)


class _Keeper(Protocol[N_co]):
    """A backend that keeps latches itself (:func:`latching`, :func:`async_latching`)."""

    def latch(self, name: str) -> N_co: ...


class _LatchBase(Generic[N]):
    def __init__(
        self, name: str, keeper: _Keeper[N] | None, client: ClientLike | AsyncClientLike
    ) -> None:
        """``keeper``: the client's backend if it keeps latches itself (None: the generic
        latch on leases, refused where the backend cannot hold one)."""
        self.name = validate_name(name)
        self.names = LatchNames(self.name)
        self._native: N | None = None if keeper is None else keeper.latch(self.name)
        if self._native is None:
            _refuse(holds_latches(client.internals.backend), self.name, client.url)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


class Latch(_LatchBase[NativeLatch]):
    """A count-down latch (sync API)."""

    def __init__(self, client: ClientLike, name: str) -> None:
        super().__init__(name, latching(client.internals.backend), client)
        self._client = client

    def try_set_count(self, count: int) -> bool:
        """Arm the latch with ``count`` (>= 1); False if it is counting down already."""
        if self._native is not None:
            return self._native.try_set_count(validate_count(count))
        return self._run(set_count_flow(self.names, validate_count(count)))

    def count_down(self) -> bool:
        """Take one count away (the last one opens the latch); False if it was open."""
        if self._native is not None:
            return self._native.count_down()
        return self._run(count_down_flow(self.names))

    def count(self) -> int:
        """The counts left (0: open)."""
        if self._native is not None:
            return self._native.count()
        if not _held(clock.now(), self._client.inspect(self.names.closed)).lasting:
            return 0  # open, being armed, or left by a crash: no count stands
        return len([i for i in self._client.list(self.names.counts) if i.held])

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the latch is open (True) or ``timeout`` passes (False)."""
        if self._native is not None:
            return self._native.wait(validate_timeout(timeout))
        return self._run(wait_flow(self.names, validate_timeout(timeout), clock.now()))

    def _run(self, flow: LatchFlow) -> bool:
        taken: dict[str, Lease] = {}  # brief leases not left yet: given back if we fail
        try:
            return run_flow(flow, lambda step: self._do(step, taken))
        finally:
            for lease in taken.values():
                with contextlib.suppress(FencelockError):
                    lease.release()

    def _do(self, op: Op, taken: dict[str, Lease]) -> Reply:
        client = self._client
        if isinstance(op, ListHeld):
            return Reply(clock.now(), held=holdings(client.list(op.prefix)))
        if isinstance(op, Held):
            return _held(clock.now(), client.inspect(op.name))
        if isinstance(op, Evict):
            if op.owner is not None:  # that owner's only: a compare-and-delete
                return Reply(clock.now(), client.internals.backend.release(op.name, op.owner))
            return Reply(clock.now(), client.evict(op.name) is not None)
        if isinstance(op, Take):
            try:
                taken[op.name] = client.lock(op.name, ttl=op.ttl, renew=False).acquire(op.timeout)
            except LockTimeout:
                return Reply(clock.now(), False)
            return Reply(clock.now(), not taken[op.name].lost)  # lost already: not taken
        if isinstance(op, Leave):
            lease = taken.get(op.name)
            if lease is not None:  # kept to give back should it fail (it may have landed)
                lease.expire_in(MAX_TTL)
                del taken[op.name]
            return Reply(clock.now())
        try:
            held = client.lock(op.name, ttl=BRIEF_TTL, renew=False).acquire(op.timeout)
        except LockTimeout:
            return Reply(clock.now(), False)
        with contextlib.suppress(FencelockError):
            held.release()
        return Reply(clock.now())


class AsyncLatch(_LatchBase[AsyncNativeLatch]):
    """A count-down latch (asyncio API)."""

    def __init__(self, client: AsyncClientLike, name: str) -> None:
        super().__init__(name, async_latching(client.internals.backend), client)
        self._client = client

    async def try_set_count(self, count: int) -> bool:
        """Arm the latch; as :meth:`Latch.try_set_count`."""
        if self._native is not None:
            return await self._native.try_set_count(validate_count(count))
        return await self._run(set_count_flow(self.names, validate_count(count)))

    async def count_down(self) -> bool:
        """Take one count away; as :meth:`Latch.count_down`."""
        if self._native is not None:
            return await self._native.count_down()
        return await self._run(count_down_flow(self.names))

    async def count(self) -> int:
        """The counts left (0: open)."""
        if self._native is not None:
            return await self._native.count()
        if not _held(clock.now(), await self._client.inspect(self.names.closed)).lasting:
            return 0  # open, being armed, or left by a crash: no count stands
        return len([i for i in await self._client.list(self.names.counts) if i.held])

    async def wait(self, timeout: float | None = None) -> bool:
        """Wait until the latch is open (True) or ``timeout`` passes (False)."""
        if self._native is not None:
            return await self._native.wait(validate_timeout(timeout))
        return await self._run(wait_flow(self.names, validate_timeout(timeout), clock.now()))

    async def _run(self, flow: LatchFlow) -> bool:
        taken: dict[str, AsyncLease] = {}  # brief leases not left yet: given back if we fail
        try:
            return await arun_flow(flow, lambda step: self._do(step, taken))
        finally:
            for lease in taken.values():
                with contextlib.suppress(FencelockError):
                    await lease.release()

    async def _do(self, op: Op, taken: dict[str, AsyncLease]) -> Reply:
        client = self._client
        if isinstance(op, ListHeld):
            return Reply(clock.now(), held=holdings(await client.list(op.prefix)))
        if isinstance(op, Held):
            return _held(clock.now(), await client.inspect(op.name))
        if isinstance(op, Evict):
            if op.owner is not None:  # that owner's only: a compare-and-delete
                return Reply(clock.now(), await client.internals.backend.release(op.name, op.owner))
            return Reply(clock.now(), await client.evict(op.name) is not None)
        if isinstance(op, Take):
            lock = client.lock(op.name, ttl=op.ttl, renew=False)
            try:
                taken[op.name] = await lock.acquire(op.timeout)
            except LockTimeout:
                return Reply(clock.now(), False)
            return Reply(clock.now(), not taken[op.name].lost)  # lost already: not taken
        if isinstance(op, Leave):
            lease = taken.get(op.name)
            if lease is not None:  # kept to give back should it fail (it may have landed)
                await lease.expire_in(MAX_TTL)
                del taken[op.name]
            return Reply(clock.now())
        try:
            held = await client.lock(op.name, ttl=BRIEF_TTL, renew=False).acquire(op.timeout)
        except LockTimeout:
            return Reply(clock.now(), False)
        with contextlib.suppress(FencelockError):
            await held.release()
        return Reply(clock.now())


def _held(now: float, info: LockInfo | None) -> Reply:
    """Whether the name is held, and left to last (a year, not a brief TTL)."""
    held = info is not None and info.held
    lasting = held and info is not None and (info.remaining or 0.0) > LASTING
    owner = info.owner if info is not None and held else None
    return Reply(now, held, lasting=lasting, owner=owner)
