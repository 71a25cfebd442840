"""The mutual-exclusion lock: :class:`Lock` (sync) and :class:`AsyncLock` (asyncio).

Both run the one acquire algorithm in :mod:`fencelock.engine.acquire`; each
driver only performs the operations the flow yields.
"""

from __future__ import annotations

import random
import secrets
from types import TracebackType
from typing import TYPE_CHECKING

from fencelock import clock
from fencelock.backends.base import AsyncAttempt, Attempt
from fencelock.engine.acquire import (
    AcquireFlow,
    GaveUp,
    Granted,
    Reply,
    Tried,
    TryAcquire,
    Waited,
    acquire_flow,
)
from fencelock.engine.timing import validate_timeout
from fencelock.errors import FencelockError, LockTimeout
from fencelock.holdings import this_task, this_thread
from fencelock.lease import AsyncLease, Lease, LeaseTerms

if TYPE_CHECKING:
    from fencelock.client import AsyncClient, Client


def new_owner() -> str:
    """20 random bytes, hex: unguessable and new for every acquisition attempt."""
    return secrets.token_hex(20)


def drive(flow: AcquireFlow, attempt: Attempt) -> Granted | GaveUp:
    """Run the acquire flow with blocking I/O."""
    reply: Reply | None = None
    try:
        while True:
            op = flow.send(reply) if reply is not None else next(flow)
            if isinstance(op, TryAcquire):
                started = clock.now()
                reply = Tried(attempt.try_acquire(), started, clock.now())
            else:
                attempt.wait(op.timeout)
                reply = Waited(clock.now())
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def adrive(flow: AcquireFlow, attempt: AsyncAttempt) -> Granted | GaveUp:
    """Run the acquire flow with asyncio I/O."""
    reply: Reply | None = None
    try:
        while True:
            op = flow.send(reply) if reply is not None else next(flow)
            if isinstance(op, TryAcquire):
                started = clock.now()
                reply = Tried(await attempt.try_acquire(), started, clock.now())
            else:
                await attempt.wait(op.timeout)
                reply = Waited(clock.now())
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def _timed_out(name: str, outcome: GaveUp) -> LockTimeout:
    if outcome.attempts == 1:
        return LockTimeout(f"lock {name!r} is held by another owner (tried once, no wait)")
    return LockTimeout(
        f"lock {name!r} not acquired: held by another owner for the whole "
        f"{outcome.waited:.3f}s timeout ({outcome.attempts} attempts)"
    )


class _LockBase:
    def __init__(
        self, name: str, ttl: float, renew: bool, timeout: float | None, fair: bool
    ) -> None:
        self.name, self.ttl, self.renew, self.fair = name, ttl, renew, fair
        self.timeout = validate_timeout(timeout)

    def _terms(self, owner: str, outcome: Granted | GaveUp) -> LeaseTerms:
        if isinstance(outcome, GaveUp):
            raise _timed_out(self.name, outcome)
        return LeaseTerms(
            self.name,
            outcome.owner or owner,
            outcome.token,
            self.ttl,
            self.renew,
            outcome.trusted_until,
        )

    def _flow(self, timeout: float | None) -> AcquireFlow:
        return acquire_flow(self.ttl, validate_timeout(timeout), clock.now(), random.random)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} ttl={self.ttl}>"


class Lock(_LockBase):
    """A named mutual-exclusion lock. ``with lock as lease:`` holds it for the block.

    Entering raises (and the block does not run) if the lock is not acquired
    within the lock's ``timeout``; leaving raises :class:`LeaseLost` if the
    lease was lost while the block ran.
    """

    def __init__(
        self,
        client: Client,
        name: str,
        ttl: float,
        renew: bool,
        timeout: float | None = None,
        fair: bool = False,
    ) -> None:
        super().__init__(name, ttl, renew, timeout, fair)
        self._client = client
        self._entered: dict[object, Lease] = {}  # by thread: ``with`` in many threads

    def acquire(self, timeout: float | None = None) -> Lease:
        """Take the lock and return its :class:`Lease`.

        ``timeout=None`` waits as long as it takes; ``0`` tries once (``with``
        uses the lock's own ``timeout``). Raises
        :class:`LockTimeout` when it gives up, :class:`BackendUnavailable` when
        the server cannot be reached; nothing is left held in either case.
        :class:`AlreadyHeld` if this thread holds it already (it would wait for itself).
        """
        holdings, holder = self._client._holdings, this_thread()
        holdings.refuse_reentry(self.name, holder)
        owner = new_owner()
        attempt = self._client._backend.attempt(self.name, owner, self.ttl, self.fair)
        try:
            outcome = drive(self._flow(timeout), attempt)
        finally:
            attempt.close()
        lease = Lease(self._client._backend, holdings, self._terms(owner, outcome))
        holdings.add(lease, holder)
        return lease

    def try_acquire(self) -> Lease | None:
        """Try once: the :class:`Lease`, or None if another owner holds the lock."""
        try:
            return self.acquire(timeout=0)
        except LockTimeout:
            return None

    def locked(self) -> bool:
        """Whether anyone (this client or another) holds the lock now."""
        return self._client.locked(self.name)

    def __enter__(self) -> Lease:
        lease = self.acquire(self.timeout)
        self._entered[this_thread()] = lease
        return lease

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        lease = self._entered.pop(this_thread(), None)
        if lease is None:
            return
        try:
            lease.release()
        except FencelockError:
            if exc is None:
                raise


class AsyncLock(_LockBase):
    """A named lock for asyncio: ``async with lock as lease:``."""

    def __init__(
        self,
        client: AsyncClient,
        name: str,
        ttl: float,
        renew: bool,
        timeout: float | None = None,
        fair: bool = False,
    ) -> None:
        super().__init__(name, ttl, renew, timeout, fair)
        self._client = client
        self._entered: dict[object, AsyncLease] = {}  # by task

    async def acquire(self, timeout: float | None = None) -> AsyncLease:
        """Take the lock; same contract as :meth:`Lock.acquire` (per task, not thread)."""
        holdings, holder = self._client._holdings, this_task()
        holdings.refuse_reentry(self.name, holder)
        owner = new_owner()
        attempt = self._client._backend.attempt(self.name, owner, self.ttl, self.fair)
        try:
            outcome = await adrive(self._flow(timeout), attempt)
        finally:
            await attempt.close()
        lease = AsyncLease(self._client._backend, holdings, self._terms(owner, outcome))
        holdings.add(lease, holder)
        return lease

    async def try_acquire(self) -> AsyncLease | None:
        """Try once: the :class:`AsyncLease`, or None if another owner holds the lock."""
        try:
            return await self.acquire(timeout=0)
        except LockTimeout:
            return None

    async def locked(self) -> bool:
        """Whether anyone (this client or another) holds the lock now."""
        return await self._client.locked(self.name)

    async def __aenter__(self) -> AsyncLease:
        lease = await self.acquire(self.timeout)
        self._entered[this_task()] = lease
        return lease

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        lease = self._entered.pop(this_task(), None)
        if lease is None:
            return
        try:
            await lease.release()
        except FencelockError:
            if exc is None:
                raise
