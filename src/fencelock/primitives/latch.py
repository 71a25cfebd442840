"""Count-down latches (Redisson's RCountDownLatch): count down from N; waiters wake at
zero; the count lives on the server, so it survives the crash of any client.

The flows are :mod:`fencelock.engine.latch`'s; the drivers here perform their ops.
A latch needs unrenewed leases that outlive their client (``Backend.outlives_client``),
or a backend that keeps latches itself (ZooKeeper: a persistent node).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from fencelock import clock
from fencelock.backends.base import (
    AsyncNativeLatch,
    NativeLatch,
    async_latching,
    holds_latches,
    latching,
)
from fencelock.engine.latch import (
    Arm,
    Await,
    Count,
    Evict,
    Held,
    LatchFlow,
    LatchNames,
    Reply,
    count_down_flow,
    set_count_flow,
    validate_count,
    wait_flow,
)
from fencelock.engine.names import validate_name
from fencelock.engine.timing import MAX_TTL, validate_timeout
from fencelock.errors import ConfigError, FencelockError, LockTimeout

if TYPE_CHECKING:
    from fencelock.client import AsyncClient, Client

KEEP_TTL = 10.0  # the TTL a count lease is taken with before it is left for a year
BRIEF_TTL = 5.0  # a waiter's hold of ``closed``, given straight back


def _refuse(holds: bool, name: str, url: str) -> None:
    if not holds:
        raise ConfigError(
            f"latch {name!r}: a latch's count must outlive the clients that set it and "
            f"wake its waiters at zero, and on {url.split('://', 1)[0]}:// nothing does both "
            "(a lease ends with its connection, and nothing rings when a kept name is let "
            "go; see docs/backends.md)"
        )


class _LatchBase:
    def __init__(self, name: str) -> None:
        self.name = validate_name(name)
        self.names = LatchNames(self.name)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


class Latch(_LatchBase):
    """A count-down latch (sync API)."""

    def __init__(self, client: Client, name: str) -> None:
        super().__init__(name)
        self._client = client
        keeper = latching(client._backend)
        self._native: NativeLatch | None = None if keeper is None else keeper.latch(self.name)
        if self._native is None:
            _refuse(holds_latches(client._backend), self.name, client.url)

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
        return len([i for i in self._client.list(self.names.counts) if i.held])

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the latch is open (True) or ``timeout`` passes (False)."""
        if self._native is not None:
            return self._native.wait(validate_timeout(timeout))
        return self._run(wait_flow(self.names, validate_timeout(timeout), clock.now()))

    def _run(self, flow: LatchFlow) -> bool:
        reply: Reply | None = None
        try:
            while True:
                op = flow.send(reply) if reply is not None else next(flow)
                reply = Reply(clock.now(), *self._do(op))
        except StopIteration as done:
            result: bool = done.value
            return result

    def _do(self, op: object) -> tuple[bool, tuple[str, ...]]:
        client = self._client
        if isinstance(op, Count):
            return True, tuple(i.name for i in client.list(op.prefix) if i.held)
        if isinstance(op, Held):
            return client.locked(op.name), ()
        if isinstance(op, Evict):
            return client.evict(op.name) is not None, ()
        if isinstance(op, Arm):
            lease = client.lock(op.name, ttl=KEEP_TTL, renew=False)
            try:
                lease.acquire(op.timeout).expire_in(MAX_TTL)
            except LockTimeout:
                return False, ()
            return True, ()
        assert isinstance(op, Await)
        try:
            held = client.lock(op.name, ttl=BRIEF_TTL, renew=False).acquire(op.timeout)
        except LockTimeout:
            return False, ()
        with contextlib.suppress(FencelockError):
            held.release()
        return True, ()


class AsyncLatch(_LatchBase):
    """A count-down latch (asyncio API)."""

    def __init__(self, client: AsyncClient, name: str) -> None:
        super().__init__(name)
        self._client = client
        keeper = async_latching(client._backend)
        self._native: AsyncNativeLatch | None = None if keeper is None else keeper.latch(self.name)
        if self._native is None:
            _refuse(holds_latches(client._backend), self.name, client.url)

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
        return len([i for i in await self._client.list(self.names.counts) if i.held])

    async def wait(self, timeout: float | None = None) -> bool:
        """Wait until the latch is open (True) or ``timeout`` passes (False)."""
        if self._native is not None:
            return await self._native.wait(validate_timeout(timeout))
        return await self._run(wait_flow(self.names, validate_timeout(timeout), clock.now()))

    async def _run(self, flow: LatchFlow) -> bool:
        reply: Reply | None = None
        try:
            while True:
                op = flow.send(reply) if reply is not None else next(flow)
                reply = Reply(clock.now(), *await self._do(op))
        except StopIteration as done:
            result: bool = done.value
            return result

    async def _do(self, op: object) -> tuple[bool, tuple[str, ...]]:
        client = self._client
        if isinstance(op, Count):
            return True, tuple(i.name for i in await client.list(op.prefix) if i.held)
        if isinstance(op, Held):
            return await client.locked(op.name), ()
        if isinstance(op, Evict):
            return await client.evict(op.name) is not None, ()
        if isinstance(op, Arm):
            lease = client.lock(op.name, ttl=KEEP_TTL, renew=False)
            try:
                await (await lease.acquire(op.timeout)).expire_in(MAX_TTL)
            except LockTimeout:
                return False, ()
            return True, ()
        assert isinstance(op, Await)
        try:
            held = await client.lock(op.name, ttl=BRIEF_TTL, renew=False).acquire(op.timeout)
        except LockTimeout:
            return False, ()
        with contextlib.suppress(FencelockError):
            await held.release()
        return True, ()
