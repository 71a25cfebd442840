"""Semaphores with a lease per permit (Redisson's permit-expirable semaphore).

The flow is :mod:`fencelock.engine.semaphore`'s; the drivers here perform its ops. A
permit is an ordinary lease, renewed on its own, so a crashed holder's permit comes
back after its TTL; giving a permit back rings the bell the next waiter listens to.
"""

from __future__ import annotations

import contextlib
import random
from typing import Any, Generic, TypeVar

from fencelock import clock
from fencelock.backends.base import LockInfo, PermitsInUse, Share, async_sharing, sharing
from fencelock.engine.acquire import Granted, acquire_flow
from fencelock.engine.names import validate_name
from fencelock.engine.operations import AwaitRelease, Blocked, Holding, Reply
from fencelock.engine.semaphore import (
    Arm,
    Disarm,
    Op,
    PermitMismatch,
    SemaphoreFlow,
    SemaphoreNames,
    counts_of,
)
from fencelock.engine.semaphore import acquire_flow as permit_flow
from fencelock.engine.timing import validate_timeout
from fencelock.errors import ConfigError, FencelockError, LockTimeout
from fencelock.lease import AsyncLease, Lease, LeaseBase
from fencelock.primitives.blocks import AsyncHeldInBlocks, GateHold, HeldInBlocks
from fencelock.primitives.client_like import AsyncClientLike, ClientLike
from fencelock.primitives.flow_leases import AsyncFlowLeases, FlowLeases, holdings
from fencelock.primitives.lock import AsyncLock, Lock, adrive, drive, new_owner

L = TypeVar("L", bound=LeaseBase)
C = TypeVar("C", ClientLike, AsyncClientLike)
H = TypeVar("H", bound="GateHold[Any]")


def validate_permits(permits: object) -> int:
    if isinstance(permits, bool) or not isinstance(permits, int) or permits < 1:
        raise ConfigError(f"a semaphore's permits must be an int >= 1, got {permits!r}")
    return permits


def held_permits(listed: list[LockInfo]) -> list[LockInfo]:
    """The permits held among a listing of a semaphore's permits (one lease each: a
    generic slot ``NAME.sem/p/<n>/<k>``, or a native permit ``NAME.sem/p/<n>/<seq>``)."""
    return [info for info in listed if info.held]


def _failed(name: str, permits: int, outcome: Blocked | PermitMismatch) -> FencelockError:
    if isinstance(outcome, PermitMismatch):
        return ConfigError(
            f"semaphore {name!r} is in use with {outcome.held_with} permits; asked with "
            f"{permits} (the count is fixed while any permit is held)"
        )
    return LockTimeout(
        f"semaphore {name!r}: no permit of {permits} came free within {outcome.waited:.3f}s"
    )


class _PermitBase(GateHold[L], Generic[L, C]):
    def __init__(self, name: str, lease: L, token: int, client: C, rings: bool) -> None:
        super().__init__(name, lease, token)
        self._client: C = client
        self._rings = rings  # a native permit's waiters watch the line


class Permit(_PermitBase[Lease, ClientLike]):
    """A held permit (sync API)."""

    def release(self) -> None:
        """Give the permit back and ring for the next waiter; :class:`LeaseLost` if it
        was lost before."""
        try:
            self.lease.release()
        finally:
            if self._rings:
                with contextlib.suppress(FencelockError):
                    self._client.evict(SemaphoreNames(self.name).bell)


class AsyncPermit(_PermitBase[AsyncLease, AsyncClientLike]):
    """A held permit (asyncio API)."""

    async def release(self) -> None:
        """Give the permit back; as :meth:`Permit.release`."""
        try:
            await self.lease.release()
        finally:
            if self._rings:
                with contextlib.suppress(FencelockError):
                    await self._client.evict(SemaphoreNames(self.name).bell)


class _SemaphoreBase(Generic[C, H]):
    def __init__(
        self, client: C, name: str, permits: int, ttl: float, timeout: float | None
    ) -> None:
        self._client: C = client
        self._entered: dict[object, list[H]] = {}  # by thread or task, innermost last
        self.name = validate_name(name)
        self.permits = validate_permits(permits)
        self.ttl = ttl
        self.timeout = validate_timeout(timeout)
        self.names = SemaphoreNames(self.name)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} permits={self.permits}>"

    def _flow(self, timeout: float | None) -> SemaphoreFlow:
        return permit_flow(self.names, self.permits, validate_timeout(timeout), clock.now())

    @property
    def _share(self) -> Share:
        return Share("permit", self.permits)

    def _failed_natively(self, failed: FencelockError, started: float) -> FencelockError:
        if isinstance(failed, PermitsInUse):
            return _failed(self.name, self.permits, PermitMismatch(failed.held_with))
        return _failed(self.name, self.permits, Blocked(self.names.line, clock.now() - started))

    def _available(self, held: tuple[Holding, ...]) -> int:
        if counts_of(held, self.names) - {self.permits}:
            return 0
        return max(0, self.permits - len(held))


class Semaphore(_SemaphoreBase[ClientLike, Permit], HeldInBlocks[Permit]):
    """A semaphore of ``permits`` permits (sync API): ``with sem as permit:``."""

    def _acquire(self, timeout: float | None) -> Permit:
        """Take a permit; :class:`LockTimeout` (nothing held) after ``timeout``."""
        if sharing(self._client.internals.backend) is not None:
            return self._acquire_natively(timeout)
        leases = FlowLeases(self._client, self.ttl)
        bell: Lease | None = None  # the bell's lease while armed

        def ring(step: Arm | Disarm | AwaitRelease) -> Reply:
            nonlocal bell
            bell, reply = self._ring_op(step, bell)
            return reply

        try:
            outcome = leases.run(self._flow(timeout), ring)
        except BaseException:
            if bell is not None:
                with contextlib.suppress(FencelockError):
                    bell.release()
            raise
        if outcome is not None:
            raise _failed(self.name, self.permits, outcome)
        (lease,) = leases.taken.values()
        return Permit(self.name, lease, leases.tokens[self.names.gate], self._client, True)

    def _acquire_natively(self, timeout: float | None) -> Permit:
        """One permit entry in the backend's own queue (ZooKeeper's sequential nodes)."""
        lock = Lock(
            self._client.internals, self.names.line, ttl=self.ttl, renew=True, share=self._share
        )
        started = clock.now()
        try:
            lease = lock.acquire(validate_timeout(timeout))
        except (PermitsInUse, LockTimeout) as failed:
            raise self._failed_natively(failed, started) from None
        return Permit(self.name, lease, lease.token, self._client, False)

    def _ring_op(self, op: Op, bell: Lease | None) -> tuple[Lease | None, Reply]:
        """The bell's ops: what the bell lease is after ``op``, and the reply."""
        if isinstance(op, Arm):
            return bell or self._arm(op.name), Reply(clock.now())
        if isinstance(op, Disarm):
            if bell is not None:
                with contextlib.suppress(FencelockError):
                    bell.release()
            return None, Reply(clock.now())
        assert isinstance(op, AwaitRelease)
        rung = self._await_bell(op.name, op.timeout)
        if rung and bell is not None:
            with contextlib.suppress(FencelockError):  # the ringer ended it: no news
                bell._left_to_expire(self._client.internals.holdings)
            bell = None
        return bell, Reply(clock.now(), granted=rung)

    def _arm(self, bell: str) -> Lease:
        lock = self._client.lock(bell, ttl=self.ttl, renew=False)
        armed = lock.try_acquire()
        if armed is None:  # a waiter before us left it armed: we hold the gate now
            self._client.evict(bell)
            armed = lock.acquire(timeout=self.ttl)
        return armed

    def _await_bell(self, bell: str, timeout: float | None) -> bool:
        owner = new_owner()
        attempt = self._client.internals.backend.attempt(bell, owner, self.ttl, renewed=False)
        try:
            outcome = drive(acquire_flow(self.ttl, timeout, clock.now(), random.random), attempt)
        finally:
            attempt.close()
        if isinstance(outcome, Granted):
            with contextlib.suppress(FencelockError):
                self._client.internals.backend.release(bell, outcome.owner or owner)
            return True
        return False

    def available(self) -> int:
        """Permits free now (0 if the name is in use with another count)."""
        return self._available(holdings(self._client.list(self.names.permits)))

    def holders(self) -> list[LockInfo]:
        """Each permit held now (kazoo's ``lease_holders()``), as ``client.list`` shows
        it: its part's name, its holder (``.holder``: host, PID, program), the token of
        its lease (``permit.lease.token``) and the TTL it has left. Permits of another
        count are listed too. :class:`BackendUnavailable` if the server cannot be reached."""
        return held_permits(self._client.list(self.names.permits))


class AsyncSemaphore(_SemaphoreBase[AsyncClientLike, AsyncPermit], AsyncHeldInBlocks[AsyncPermit]):
    """A semaphore of ``permits`` permits (asyncio API): ``async with sem as permit:``."""

    async def _acquire(self, timeout: float | None) -> AsyncPermit:
        """Take a permit; as :meth:`Semaphore.acquire`."""
        if async_sharing(self._client.internals.backend) is not None:
            return await self._acquire_natively(timeout)
        leases = AsyncFlowLeases(self._client, self.ttl)
        bell: AsyncLease | None = None  # the bell's lease while armed

        async def ring(step: Arm | Disarm | AwaitRelease) -> Reply:
            nonlocal bell
            bell, reply = await self._ring_op(step, bell)
            return reply

        try:
            outcome = await leases.run(self._flow(timeout), ring)
        except BaseException:
            if bell is not None:
                with contextlib.suppress(FencelockError):
                    await bell.release()
            raise
        if outcome is not None:
            raise _failed(self.name, self.permits, outcome)
        (lease,) = leases.taken.values()
        return AsyncPermit(self.name, lease, leases.tokens[self.names.gate], self._client, True)

    async def _acquire_natively(self, timeout: float | None) -> AsyncPermit:
        """One permit entry in the backend's own queue; as :meth:`Semaphore._acquire_natively`."""
        lock = AsyncLock(
            self._client.internals, self.names.line, ttl=self.ttl, renew=True, share=self._share
        )
        started = clock.now()
        try:
            lease = await lock.acquire(validate_timeout(timeout))
        except (PermitsInUse, LockTimeout) as failed:
            raise self._failed_natively(failed, started) from None
        return AsyncPermit(self.name, lease, lease.token, self._client, False)

    async def _ring_op(self, op: Op, bell: AsyncLease | None) -> tuple[AsyncLease | None, Reply]:
        """The bell's ops; as :meth:`Semaphore._ring_op`."""
        if isinstance(op, Arm):
            return bell or await self._arm(op.name), Reply(clock.now())
        if isinstance(op, Disarm):
            if bell is not None:
                with contextlib.suppress(FencelockError):
                    await bell.release()
            return None, Reply(clock.now())
        assert isinstance(op, AwaitRelease)
        rung = await self._await_bell(op.name, op.timeout)
        if rung and bell is not None:
            with contextlib.suppress(FencelockError):
                bell._left_to_expire(self._client.internals.holdings)
            bell = None
        return bell, Reply(clock.now(), granted=rung)

    async def _arm(self, bell: str) -> AsyncLease:
        lock = self._client.lock(bell, ttl=self.ttl, renew=False)
        armed = await lock.try_acquire()
        if armed is None:
            await self._client.evict(bell)
            armed = await lock.acquire(timeout=self.ttl)
        return armed

    async def _await_bell(self, bell: str, timeout: float | None) -> bool:
        owner = new_owner()
        attempt = self._client.internals.backend.attempt(bell, owner, self.ttl, renewed=False)
        try:
            outcome = await adrive(
                acquire_flow(self.ttl, timeout, clock.now(), random.random), attempt
            )
        finally:
            await attempt.close()
        if isinstance(outcome, Granted):
            with contextlib.suppress(FencelockError):
                await self._client.internals.backend.release(bell, outcome.owner or owner)
            return True
        return False

    async def available(self) -> int:
        """Permits free now (0 if the name is in use with another count)."""
        return self._available(holdings(await self._client.list(self.names.permits)))

    async def holders(self) -> list[LockInfo]:
        """Each permit held now; as :meth:`Semaphore.holders`."""
        return held_permits(await self._client.list(self.names.permits))
