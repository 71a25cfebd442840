"""Semaphores with a lease per permit (Redisson's permit-expirable semaphore).

The flow is :mod:`fencelock.engine.semaphore`'s; the drivers here perform its ops. A
permit is an ordinary lease, renewed on its own, so a crashed holder's permit comes
back after its TTL; giving a permit back rings the bell the next waiter listens to.
"""

from __future__ import annotations

import contextlib
import random
from typing import TYPE_CHECKING, TypeVar

from fencelock import clock
from fencelock.backends.base import LockInfo
from fencelock.engine.acquire import Granted, acquire_flow
from fencelock.engine.names import validate_name
from fencelock.engine.semaphore import (
    Arm,
    AwaitBell,
    Disarm,
    Held,
    ListPermits,
    Op,
    PermitMismatch,
    Reply,
    SemaphoreFlow,
    SemaphoreNames,
    counts_of,
)
from fencelock.engine.semaphore import acquire_flow as permit_flow
from fencelock.engine.steps import Blocked, Give, Take
from fencelock.engine.timing import validate_timeout
from fencelock.errors import ConfigError, FencelockError, LockTimeout
from fencelock.lease import AsyncLease, Lease, LeaseBase
from fencelock.primitives.blocks import AsyncHeldInBlocks, GateHold, HeldInBlocks
from fencelock.primitives.lock import adrive, drive, new_owner

if TYPE_CHECKING:
    from fencelock.client import AsyncClient, Client

L = TypeVar("L", bound=LeaseBase)


def validate_permits(permits: object) -> int:
    if isinstance(permits, bool) or not isinstance(permits, int) or permits < 1:
        raise ConfigError(f"a semaphore's permits must be an int >= 1, got {permits!r}")
    return permits


def _failed(name: str, permits: int, outcome: Blocked | PermitMismatch) -> FencelockError:
    if isinstance(outcome, PermitMismatch):
        return ConfigError(
            f"semaphore {name!r} is in use with {outcome.held_with} permits; asked with "
            f"{permits} (the count is fixed while any permit is held)"
        )
    return LockTimeout(
        f"semaphore {name!r}: no permit of {permits} came free within {outcome.waited:.3f}s"
    )


class Permit(GateHold[Lease]):
    """A held permit (sync API)."""

    def __init__(self, name: str, lease: Lease, token: int, client: Client) -> None:
        super().__init__(name, lease, token)
        self._client = client

    def release(self) -> None:
        """Give the permit back and ring for the next waiter; :class:`LeaseLost` if it
        was lost before."""
        try:
            self.lease.release()
        finally:
            with contextlib.suppress(FencelockError):
                self._client.evict(SemaphoreNames(self.name).bell)


class AsyncPermit(GateHold[AsyncLease]):
    """A held permit (asyncio API)."""

    def __init__(self, name: str, lease: AsyncLease, token: int, client: AsyncClient) -> None:
        super().__init__(name, lease, token)
        self._client = client

    async def release(self) -> None:
        """Give the permit back; as :meth:`Permit.release`."""
        try:
            await self.lease.release()
        finally:
            with contextlib.suppress(FencelockError):
                await self._client.evict(SemaphoreNames(self.name).bell)


class _SemaphoreBase:
    def __init__(self, name: str, permits: int, ttl: float, timeout: float | None) -> None:
        self.name = validate_name(name)
        self.permits = validate_permits(permits)
        self.ttl = ttl
        self.timeout = validate_timeout(timeout)
        self.names = SemaphoreNames(self.name)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} permits={self.permits}>"

    def _flow(self, timeout: float | None) -> SemaphoreFlow:
        return permit_flow(self.names, self.permits, validate_timeout(timeout), clock.now())

    def _held(self, infos: list[LockInfo]) -> tuple[Held, ...]:
        return tuple(Held(i.name, i.remaining) for i in infos if i.held)

    def _available(self, held: tuple[Held, ...]) -> int:
        if counts_of(held, self.names) - {self.permits}:
            return 0
        return max(0, self.permits - len(held))


class Semaphore(_SemaphoreBase, HeldInBlocks[Permit]):
    """A semaphore of ``permits`` permits (sync API): ``with sem as permit:``."""

    def __init__(
        self, client: Client, name: str, permits: int, ttl: float, timeout: float | None
    ) -> None:
        super().__init__(name, permits, ttl, timeout)
        self._client = client
        self._entered: dict[object, list[Permit]] = {}

    def acquire(self, timeout: float | None = None) -> Permit:
        """Take a permit; :class:`LockTimeout` (nothing held) after ``timeout``."""
        flow = self._flow(timeout)
        taken: dict[str, Lease] = {}
        bell: Lease | None = None
        gate_token, reply = 0, None
        try:
            while True:
                op: Op = flow.send(reply) if reply is not None else next(flow)
                if isinstance(op, (Arm, Disarm, AwaitBell)):
                    bell, reply = self._ring_op(op, bell)
                    continue
                granted, held = self._lease_op(op, taken)
                gate_token = gate_token or next((t.token for t in taken.values()), 0)
                reply = Reply(clock.now(), granted, held)
        except StopIteration as done:
            outcome: Blocked | PermitMismatch | None = done.value
        except BaseException:
            for lease in [*taken.values(), *([bell] if bell else [])]:
                with contextlib.suppress(FencelockError):
                    lease.release()
            raise
        if outcome is not None:
            raise _failed(self.name, self.permits, outcome)
        (lease,) = taken.values()
        return Permit(self.name, lease, gate_token, self._client)

    def _lease_op(self, op: Op, taken: dict[str, Lease]) -> tuple[bool, tuple[Held, ...]]:
        if isinstance(op, Take):
            try:
                taken[op.name] = self._client.lock(op.name, ttl=self.ttl).acquire(op.timeout)
            except LockTimeout:
                return False, ()
            return True, ()
        if isinstance(op, Give):
            taken.pop(op.name).release()
            return True, ()
        assert isinstance(op, ListPermits)
        return True, self._held(self._client.list(op.prefix))

    def _ring_op(self, op: Op, bell: Lease | None) -> tuple[Lease | None, Reply]:
        """The bell's ops: what the bell lease is after ``op``, and the reply."""
        if isinstance(op, Arm):
            return bell or self._arm(op.name), Reply(clock.now())
        if isinstance(op, Disarm):
            if bell is not None:
                with contextlib.suppress(FencelockError):
                    bell.release()
            return None, Reply(clock.now())
        assert isinstance(op, AwaitBell)
        rung = self._await_bell(op.name, op.timeout)
        if rung and bell is not None:
            with contextlib.suppress(FencelockError):  # the ringer ended it: no news
                bell._left_to_expire(self._client._holdings)
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
        attempt = self._client._backend.attempt(bell, owner, self.ttl, renewed=False)
        try:
            outcome = drive(acquire_flow(self.ttl, timeout, clock.now(), random.random), attempt)
        finally:
            attempt.close()
        if isinstance(outcome, Granted):
            with contextlib.suppress(FencelockError):
                self._client._backend.release(bell, outcome.owner or owner)
            return True
        return False

    def try_acquire(self) -> Permit | None:
        """Take a permit if one is free now; None otherwise."""
        try:
            return self.acquire(timeout=0)
        except LockTimeout:
            return None

    def available(self) -> int:
        """Permits free now (0 if the name is in use with another count)."""
        return self._available(self._held(self._client.list(self.names.permits)))


class AsyncSemaphore(_SemaphoreBase, AsyncHeldInBlocks[AsyncPermit]):
    """A semaphore of ``permits`` permits (asyncio API): ``async with sem as permit:``."""

    def __init__(
        self, client: AsyncClient, name: str, permits: int, ttl: float, timeout: float | None
    ) -> None:
        super().__init__(name, permits, ttl, timeout)
        self._client = client
        self._entered: dict[object, list[AsyncPermit]] = {}

    async def acquire(self, timeout: float | None = None) -> AsyncPermit:
        """Take a permit; as :meth:`Semaphore.acquire`."""
        flow = self._flow(timeout)
        taken: dict[str, AsyncLease] = {}
        bell: AsyncLease | None = None
        gate_token, reply = 0, None
        try:
            while True:
                op: Op = flow.send(reply) if reply is not None else next(flow)
                if isinstance(op, (Arm, Disarm, AwaitBell)):
                    bell, reply = await self._ring_op(op, bell)
                    continue
                granted, held = await self._lease_op(op, taken)
                gate_token = gate_token or next((t.token for t in taken.values()), 0)
                reply = Reply(clock.now(), granted, held)
        except StopIteration as done:
            outcome: Blocked | PermitMismatch | None = done.value
        except BaseException:
            for lease in [*taken.values(), *([bell] if bell else [])]:
                with contextlib.suppress(FencelockError):
                    await lease.release()
            raise
        if outcome is not None:
            raise _failed(self.name, self.permits, outcome)
        (lease,) = taken.values()
        return AsyncPermit(self.name, lease, gate_token, self._client)

    async def _lease_op(
        self, op: Op, taken: dict[str, AsyncLease]
    ) -> tuple[bool, tuple[Held, ...]]:
        if isinstance(op, Take):
            try:
                lock = self._client.lock(op.name, ttl=self.ttl)
                taken[op.name] = await lock.acquire(op.timeout)
            except LockTimeout:
                return False, ()
            return True, ()
        if isinstance(op, Give):
            await taken.pop(op.name).release()
            return True, ()
        assert isinstance(op, ListPermits)
        return True, self._held(await self._client.list(op.prefix))

    async def _ring_op(self, op: Op, bell: AsyncLease | None) -> tuple[AsyncLease | None, Reply]:
        """The bell's ops; as :meth:`Semaphore._ring_op`."""
        if isinstance(op, Arm):
            return bell or await self._arm(op.name), Reply(clock.now())
        if isinstance(op, Disarm):
            if bell is not None:
                with contextlib.suppress(FencelockError):
                    await bell.release()
            return None, Reply(clock.now())
        assert isinstance(op, AwaitBell)
        rung = await self._await_bell(op.name, op.timeout)
        if rung and bell is not None:
            with contextlib.suppress(FencelockError):
                bell._left_to_expire(self._client._holdings)
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
        attempt = self._client._backend.attempt(bell, owner, self.ttl, renewed=False)
        try:
            outcome = await adrive(
                acquire_flow(self.ttl, timeout, clock.now(), random.random), attempt
            )
        finally:
            await attempt.close()
        if isinstance(outcome, Granted):
            with contextlib.suppress(FencelockError):
                await self._client._backend.release(bell, outcome.owner or owner)
            return True
        return False

    async def try_acquire(self) -> AsyncPermit | None:
        """Take a permit if one is free now; None otherwise."""
        try:
            return await self.acquire(timeout=0)
        except LockTimeout:
            return None

    async def available(self) -> int:
        """Permits free now (0 if the name is in use with another count)."""
        return self._available(self._held(await self._client.list(self.names.permits)))
