"""Read-write locks: many readers or one writer, writers not starved, a token per hold.

The flows are :mod:`fencelock.engine.rwlock`'s; the drivers here take and give the
leases they ask for. A read hold is a reader lease; a write hold is the gate's lease.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypeVar

from fencelock import clock
from fencelock.backends.base import Share, async_sharing, sharing
from fencelock.client_leases import this_task, this_thread
from fencelock.engine.names import validate_name
from fencelock.engine.operations import Blocked
from fencelock.engine.rwlock import RWFlow, RWNames, read_flow, write_flow
from fencelock.engine.timing import validate_timeout
from fencelock.errors import AlreadyHeld, LockTimeout
from fencelock.lease import AsyncLease, Lease, LeaseBase
from fencelock.primitives.blocks import AsyncHeldInBlocks, GateHold, HeldInBlocks
from fencelock.primitives.client_like import AsyncClientLike, ClientLike
from fencelock.primitives.flow_leases import AsyncFlowLeases, FlowLeases
from fencelock.primitives.lock import AsyncLock, Lock

L = TypeVar("L", bound=LeaseBase)
Mode = Literal["read", "write"]


def _blocked(name: str, mode: Mode, blocked: Blocked) -> LockTimeout:
    other = "a writer" if mode == "read" or blocked.name.endswith("/gate") else "a reader"
    return LockTimeout(
        f"{mode} lock on {name!r} not acquired after {blocked.waited:.3f}s: {other} held it"
    )


class _RWLeaseBase(GateHold[L]):
    """One read or write hold: its lease, and the token it was given at the gate."""

    def __init__(self, name: str, mode: Mode, lease: L, token: int) -> None:
        super().__init__(name, lease, token)
        self.mode = mode

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} {self.mode} token={self.token}>"


class RWLease(_RWLeaseBase[Lease]):
    """A read or write hold (sync API): ``token``, ``check()``, ``release()``."""

    def release(self) -> None:
        """Give the hold back; :class:`LeaseLost` if it was lost before."""
        self.lease.release()


class AsyncRWLease(_RWLeaseBase[AsyncLease]):
    """A read or write hold (asyncio API)."""

    async def release(self) -> None:
        """Give the hold back; :class:`LeaseLost` if it was lost before."""
        await self.lease.release()


class _SideBase:
    def __init__(self, name: str, mode: Mode, ttl: float, timeout: float | None) -> None:
        self.name, self.mode, self.ttl = name, mode, ttl
        self.timeout = validate_timeout(timeout)
        self.names = RWNames(name)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} {self.mode}>"

    def _flow(self, timeout: float | None) -> RWFlow:
        timeout, now = validate_timeout(timeout), clock.now()
        if self.mode == "read":
            return read_flow(self.names, timeout, now)
        return write_flow(self.names, timeout, now)

    def _hold_name(self, taken: Mapping[str, object]) -> str:
        (name,) = taken  # what a flow that ended well holds: one lease
        return name

    @property
    def _share(self) -> Share:
        return Share(self.mode)

    def _refuse_waiting_for_itself(self, held: list[L]) -> None:
        """A native hold that would queue behind its own holder's read or write."""
        if self.mode == "write":
            self._refuse_upgrade(any(lease._entry == "read" for lease in held))
        elif any(lease._entry == "write" for lease in held):
            raise AlreadyHeld(
                f"write lock on {self.name!r} is held by this thread or task; a read lock "
                "would wait for it forever (release the write lock first)"
            )

    def _timed_out(self, started: float) -> LockTimeout:
        return LockTimeout(
            f"{self.mode} lock on {self.name!r} not acquired within {clock.now() - started:.3f}s"
        )

    def _refuse_upgrade(self, holds_reader: bool) -> None:
        if self.mode == "write" and holds_reader:
            raise AlreadyHeld(
                f"read lock on {self.name!r} is held by this thread or task; a write lock "
                "would wait for it forever (release the read lock first)"
            )


class ReadWriteSide(_SideBase, HeldInBlocks[RWLease]):
    """The read or the write side of a :class:`RWLock` (sync): ``with rw.read():``."""

    def __init__(
        self, client: ClientLike, name: str, mode: Mode, ttl: float, timeout: float | None
    ):
        super().__init__(name, mode, ttl, timeout)
        self._client = client
        self._entered: dict[object, list[RWLease]] = {}

    def _acquire(self, timeout: float | None) -> RWLease:
        """Take a read or write hold; :class:`LockTimeout` (nothing held) after ``timeout``."""
        holdings = self._client.internals.holdings
        if sharing(self._client.internals.backend) is not None:
            return self._acquire_natively(timeout)
        self._refuse_upgrade(holdings.holds_under(self.names.readers, this_thread()))
        leases = FlowLeases(self._client, self.ttl)
        blocked = leases.run(self._flow(timeout))
        if blocked is not None:
            raise _blocked(self.name, self.mode, blocked)
        hold = leases.taken[self._hold_name(leases.taken)]
        return RWLease(self.name, self.mode, hold, leases.tokens[self.names.gate])

    def _acquire_natively(self, timeout: float | None) -> RWLease:
        """One read or write entry in the backend's own line (ZooKeeper's nodes)."""
        self._refuse_waiting_for_itself(
            self._client.internals.holdings.held_by(self.names.line, this_thread())
        )
        lock = Lock(
            self._client.internals, self.names.line, ttl=self.ttl, renew=True, share=self._share
        )
        started = clock.now()
        try:
            lease = lock.acquire(validate_timeout(timeout))
        except LockTimeout:
            raise self._timed_out(started) from None
        return RWLease(self.name, self.mode, lease, lease.token)


class AsyncReadWriteSide(_SideBase, AsyncHeldInBlocks[AsyncRWLease]):
    """The read or the write side of an :class:`AsyncRWLock`: ``async with rw.read():``."""

    def __init__(
        self, client: AsyncClientLike, name: str, mode: Mode, ttl: float, timeout: float | None
    ):
        super().__init__(name, mode, ttl, timeout)
        self._client = client
        self._entered: dict[object, list[AsyncRWLease]] = {}

    async def _acquire(self, timeout: float | None) -> AsyncRWLease:
        """Take a read or write hold; as :meth:`ReadWriteSide.acquire`."""
        holdings = self._client.internals.holdings
        if async_sharing(self._client.internals.backend) is not None:
            return await self._acquire_natively(timeout)
        self._refuse_upgrade(holdings.holds_under(self.names.readers, this_task()))
        leases = AsyncFlowLeases(self._client, self.ttl)
        blocked = await leases.run(self._flow(timeout))
        if blocked is not None:
            raise _blocked(self.name, self.mode, blocked)
        hold = leases.taken[self._hold_name(leases.taken)]
        return AsyncRWLease(self.name, self.mode, hold, leases.tokens[self.names.gate])

    async def _acquire_natively(self, timeout: float | None) -> AsyncRWLease:
        """As :meth:`ReadWriteSide._acquire_natively`."""
        self._refuse_waiting_for_itself(
            self._client.internals.holdings.held_by(self.names.line, this_task())
        )
        lock = AsyncLock(
            self._client.internals, self.names.line, ttl=self.ttl, renew=True, share=self._share
        )
        started = clock.now()
        try:
            lease = await lock.acquire(validate_timeout(timeout))
        except LockTimeout:
            raise self._timed_out(started) from None
        return AsyncRWLease(self.name, self.mode, lease, lease.token)


class RWLock:
    """A read-write lock (sync): ``with rw.read():`` many at once, ``with rw.write():``
    alone."""

    def __init__(self, client: ClientLike, name: str, ttl: float, timeout: float | None) -> None:
        self.name = validate_name(name)
        self._read = ReadWriteSide(client, self.name, "read", ttl, timeout)
        self._write = ReadWriteSide(client, self.name, "write", ttl, timeout)

    def __repr__(self) -> str:
        return f"<RWLock {self.name!r}>"

    def read(self) -> ReadWriteSide:
        """The read side: shared with other readers, never with a writer."""
        return self._read

    def write(self) -> ReadWriteSide:
        """The write side: alone; once a writer waits, new readers wait behind it."""
        return self._write


class AsyncRWLock:
    """A read-write lock for asyncio: ``async with rw.read():``, ``async with rw.write():``."""

    def __init__(
        self, client: AsyncClientLike, name: str, ttl: float, timeout: float | None
    ) -> None:
        self.name = validate_name(name)
        self._read = AsyncReadWriteSide(client, self.name, "read", ttl, timeout)
        self._write = AsyncReadWriteSide(client, self.name, "write", ttl, timeout)

    def __repr__(self) -> str:
        return f"<AsyncRWLock {self.name!r}>"

    def read(self) -> AsyncReadWriteSide:
        """The read side; as :meth:`RWLock.read`."""
        return self._read

    def write(self) -> AsyncReadWriteSide:
        """The write side; as :meth:`RWLock.write`."""
        return self._write
