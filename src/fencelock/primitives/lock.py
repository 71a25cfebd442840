"""The mutual-exclusion lock: :class:`Lock` (sync) and :class:`AsyncLock` (asyncio).

Both run the one acquire algorithm in :mod:`fencelock.engine.acquire`; each
driver only performs the operations the flow yields.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import math
import random
import secrets
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Generic, Literal, ParamSpec, Protocol, TypeVar, overload

from fencelock import clock
from fencelock.backends.base import (
    AsyncAttempt,
    AsyncBackend,
    Attempt,
    Backend,
    LockInfo,
    Share,
    async_sharing,
    sharing,
)
from fencelock.backends.bounds import alimited
from fencelock.backends.shared_loop import limited
from fencelock.blocking_call import call_ends_at
from fencelock.client_internals import ClientInternals
from fencelock.client_leases import this_task, this_thread
from fencelock.engine.acquire import (
    AcquireFlow,
    GaveUp,
    Granted,
    Reply,
    Tried,
    TryAcquire,
    Unreachable,
    Waited,
    acquire_flow,
)
from fencelock.engine.deadline import CallEnd
from fencelock.engine.timing import validate_timeout, validate_ttl
from fencelock.errors import BackendUnavailable, ConfigError, FencelockError, LockTimeout
from fencelock.holder import Holder, owner_value
from fencelock.lease import AsyncLease, Lease, LeaseBase, LeaseTerms
from fencelock.metrics import REGISTRY
from fencelock.primitives.contenders import line_of
from fencelock.primitives.pending import BlockingAcquire, PendingAcquires
from fencelock.stopping import TaskStopper, ThreadStopper
from fencelock.tracing import Traced, acquiring

B = TypeVar("B", Backend, AsyncBackend)
Stopper = TaskStopper | ThreadStopper
L = TypeVar("L", bound=LeaseBase)
P = ParamSpec("P")
R = TypeVar("R")
A = TypeVar("A", Attempt, AsyncAttempt)
A_co = TypeVar("A_co", covariant=True)


class _Sharing(Protocol[A_co]):
    """A backend's native read/write or permit queue (:func:`sharing`)."""

    def shared_attempt(self, name: str, owner: str, ttl: float, share: Share) -> A_co: ...


def is_held(info: LockInfo | None) -> bool:
    """Whether ``info`` says the name is held now (None: never locked)."""
    return info is not None and info.held


def new_owner() -> str:
    """20 random bytes, hex (unguessable and new for every acquisition attempt), then
    who this process is (:mod:`fencelock.holder`)."""
    return owner_value(secrets.token_hex(20))


def drive(
    flow: AcquireFlow,
    attempt: Attempt,
    name: str | None = None,
    pending: BlockingAcquire | None = None,
) -> Granted | GaveUp:
    """Run the acquire flow with blocking I/O (counted as waiting on ``name``'s prefix
    from its first wait on); raises :class:`AcquireCancelled` once ``pending`` is
    cancelled (looked at before each try and around each wait, which
    ``attempt.interrupt()`` ends)."""
    reply: Reply | None = None
    waiting = False
    try:
        while True:
            op = flow.send(reply) if reply is not None else next(flow)
            if pending is not None and pending.requested:
                raise pending.cancelled()
            if isinstance(op, TryAcquire):
                started = clock.now()
                try:
                    reply = Tried(attempt.try_acquire(), started, clock.now())
                except BackendUnavailable as exc:
                    reply = Unreachable(exc, started, clock.now())
            else:
                waiting = waiting or _start_waiting(name)
                waited = clock.now() + op.timeout
                try:
                    attempt.wait(op.timeout)
                except BackendUnavailable:  # the next try says whether it lasts
                    time.sleep(max(waited - clock.now(), 0.0))
                if pending is not None and pending.requested:
                    raise pending.cancelled()
                reply = Waited(clock.now())
    except StopIteration as done:
        granted: Granted | GaveUp = done.value  # a generator's return value is untyped
        return granted
    finally:
        if waiting and name is not None:
            REGISTRY.waiting(name, -1)


async def adrive(
    flow: AcquireFlow, attempt: AsyncAttempt, name: str | None = None
) -> Granted | GaveUp:
    """Run the acquire flow with asyncio I/O; as :func:`drive`."""
    reply: Reply | None = None
    waiting = False
    try:
        while True:
            op = flow.send(reply) if reply is not None else next(flow)
            if isinstance(op, TryAcquire):
                started = clock.now()
                try:
                    reply = Tried(await attempt.try_acquire(), started, clock.now())
                except BackendUnavailable as exc:
                    reply = Unreachable(exc, started, clock.now())
            else:
                waiting = waiting or _start_waiting(name)
                waited = clock.now() + op.timeout
                try:
                    await attempt.wait(op.timeout)
                except BackendUnavailable:  # the next try says whether it lasts
                    await asyncio.sleep(max(waited - clock.now(), 0.0))
                reply = Waited(clock.now())
    except StopIteration as done:
        granted: Granted | GaveUp = done.value  # a generator's return value is untyped
        return granted
    finally:
        if waiting and name is not None:
            REGISTRY.waiting(name, -1)


def deadline_of(began: float, timeout: float | None) -> float | None:
    """When an acquire begun at ``began`` with ``timeout`` must end (None: never)."""
    checked = validate_timeout(timeout)
    return None if checked is None else began + checked


def _start_waiting(name: str | None) -> bool:
    if name is None:
        return False
    REGISTRY.waiting(name, 1)
    return True


def _timed_out(name: str, outcome: GaveUp) -> LockTimeout:
    if outcome.attempts == 1:
        return LockTimeout(f"lock {name!r} is held by another owner (tried once, no wait)")
    return LockTimeout(
        f"lock {name!r} not acquired: held by another owner for the whole "
        f"{outcome.waited:.3f}s timeout ({outcome.attempts} attempts)"
    )


class _LockBase(Generic[B, L]):
    """What both variants of lock share: the settings, and the steps before and after
    the acquire flow is driven (the drivers only send and wait)."""

    def __init__(
        self,
        internals: ClientInternals[B, L],
        name: str,
        *,
        ttl: float,
        renew: bool,
        timeout: float | None = None,
        fair: bool = False,
        max_hold: float | None = None,
        stop_on_loss: bool = False,
        reentrant: bool = False,
        share: Share | None = None,
    ) -> None:
        self._internals: ClientInternals[B, L] = internals
        self._share = share  # a native read-write lock's or semaphore's entry (see Share)
        self.name, self.ttl, self.renew, self.fair = name, ttl, renew, fair
        self.timeout = validate_timeout(timeout)
        self.max_hold = None if max_hold is None else validate_ttl(max_hold, "max_hold")
        self.stop_on_loss, self.reentrant = stop_on_loss, reentrant
        # by thread or task (``with`` in many at once), innermost last (re-entrant nesting)
        self._entered: dict[object, list[tuple[L, Stopper | None]]] = {}
        self._pending = PendingAcquires(name)

    def cancel(self) -> None:
        """Cancel every acquire of this lock object under way, from any thread or task:
        each raises :class:`AcquireCancelled` (a :class:`LockTimeout`) and leaves nothing
        held or queued. One that got the lock before the cancel landed keeps it."""
        self._pending.cancel()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} ttl={self.ttl}>"

    @property
    def _backend(self) -> B:
        return self._internals.backend

    def _reenter(self, holder: object) -> L | None:
        """``holder``'s lease on the name, taken again, if it holds one (re-entrant);
        raises :class:`AlreadyHeld` if it holds one it cannot take again."""
        if self._share is not None and self._share.kind != "write":
            return None  # every read or permit is an entry of its own, a holder's second too
        return self._internals.holdings.reenter(self.name, holder, self.reentrant)

    def _start(self, timeout: float | None) -> tuple[str, AcquireFlow, float, CallEnd]:
        """Before an acquisition: the owner, the flow, when it began, and when the call
        ends (its requests' bound)."""
        began = clock.now()
        return (
            new_owner(),
            acquire_flow(self.ttl, validate_timeout(timeout), began, random.random),
            began,
            CallEnd(deadline_of(began, timeout), self._backend.request_bound),
        )

    def _shared_attempt(self, native: _Sharing[A] | None, owner: str) -> A:
        """The attempt of a read/write lock's or a semaphore's share of the name."""
        if native is None:
            raise ConfigError(f"{self._backend.url} has no native read/write or permit queue")
        assert self._share is not None
        return native.shared_attempt(self.name, owner, self.ttl, self._share)

    def _terms(self, owner: str, outcome: Granted | GaveUp, began: float) -> LeaseTerms:
        """What the flow came to: the new lease's terms, or :class:`LockTimeout`."""
        if isinstance(outcome, GaveUp):
            REGISTRY.timed_out(self.name, clock.now() - began)
            raise _timed_out(self.name, outcome)
        REGISTRY.acquired(self.name, clock.now() - began, outcome.attempts, self.ttl)
        return LeaseTerms(
            name=self.name,
            owner=outcome.owner or owner,
            token=outcome.token,
            ttl=self.ttl,
            renew=self.renew,
            trusted_until=outcome.trusted_until,
            max_hold=self.max_hold,
            hold_until=math.inf if self.max_hold is None else outcome.started + self.max_hold,
            session=outcome.session,
            attempts=outcome.attempts,
            reentrant=self.reentrant,
            entry="lock" if self._share is None else self._share.kind,
            ttl_floor=outcome.ttl_floor,
        )

    def _refuse_a_timeout(self, timeout: float | None) -> None:
        """``blocking=False`` is one try, no wait: a timeout cannot go with it."""
        if timeout is not None:
            raise ConfigError(
                f"lock {self.name!r}: acquire(blocking=False) tries once and never waits; "
                f"it takes no timeout (got {timeout!r})"
            )

    def _owned_by(self, holder: object) -> bool:
        return bool(self._internals.holdings.held_by(self.name, holder))

    def _granted(
        self, owner: str, outcome: Granted | GaveUp, began: float, holder: object, traced: Traced
    ) -> L:
        """After the flow: the lease it came to (or :class:`LockTimeout`), held by
        ``holder`` and renewed, and the acquire's span told."""
        lease = self._new_lease(self._terms(owner, outcome, began))
        self._internals.holdings.add(lease, holder)
        traced.granted(lease)
        return lease

    def _new_lease(self, terms: LeaseTerms) -> L:
        raise NotImplementedError

    def _entering(self, holder: object, lease: L, stopper: Stopper | None) -> L:
        self._entered.setdefault(holder, []).append((lease, stopper))
        return lease

    @contextlib.contextmanager
    def _leaving(self, holder: object, exc: BaseException | None) -> Iterator[L | None]:
        """The lease ``holder`` entered the block with, for the driver to release.

        A failed release raises, unless the block raised ``exc`` (which then stands);
        a block stopped by its lease's loss raises :class:`LeaseLost` instead of how
        it was stopped (see :mod:`fencelock.stopping`).
        """
        entered = self._entered.get(holder)
        lease, stopper = entered.pop() if entered else (None, None)
        if not entered:
            self._entered.pop(holder, None)
        stopped = None if stopper is None else stopper.leaving(exc)
        try:
            yield lease
        except FencelockError:
            if exc is None:
                raise
        if stopped is not None:
            raise stopped from exc


class Lock(_LockBase[Backend, Lease]):
    """A named mutual-exclusion lock. ``with lock as lease:`` holds it for the block.

    Entering raises (and the block does not run) if the lock is not acquired
    within the lock's ``timeout``; leaving raises :class:`LeaseLost` if the
    lease was lost while the block ran.
    """

    @overload
    def acquire(self, timeout: float | None = None, *, blocking: Literal[True] = True) -> Lease: ...

    @overload
    def acquire(self, *, blocking: bool) -> Lease | None: ...

    def acquire(self, timeout: float | None = None, *, blocking: bool = True) -> Lease | None:
        """Take the lock and return its :class:`Lease`.

        ``timeout=None`` waits as long as it takes; ``0`` tries once (``with``
        uses the lock's own ``timeout``). Raises
        :class:`LockTimeout` when it gives up, :class:`BackendUnavailable` when
        the server cannot be reached; nothing is left held in either case.
        ``blocking=False`` tries once and returns None instead of raising
        :class:`LockTimeout` (as :meth:`try_acquire`; redis-py's and
        ``threading.Lock``'s spelling).
        :class:`AlreadyHeld` if this thread holds it already (it would wait for itself),
        unless the lock is re-entrant: then the same lease comes back, held once more
        (``lease.depth``), and only the last of its releases gives it back.

        :param timeout: seconds to wait; None: as long as it takes; 0: one try.
        :param blocking: False: one try, None if another owner holds the lock.
        :returns: the lease (None only with ``blocking=False``).
        :raises LockTimeout: the timeout passed with the lock held by another owner.
        :raises AcquireCancelled: :meth:`cancel` was called meanwhile (a
            :class:`LockTimeout`).
        :raises BackendUnavailable: the server cannot be reached.
        :raises AlreadyHeld: this thread holds the (not re-entrant) lock already.
        :raises ConfigError: ``blocking=False`` with a timeout.
        """
        if blocking:
            return self._acquire(timeout)
        self._refuse_a_timeout(timeout)
        return self.try_acquire()

    def _acquire(self, timeout: float | None, holder: object | None = None) -> Lease:
        """:meth:`acquire`, for ``holder`` (a face's own, :mod:`fencelock.compat`) or
        this thread."""
        holder = this_thread() if holder is None else holder
        again = self._reenter(holder)
        if again is not None:
            return again
        with acquiring(self.name, timeout, self._backend.url) as traced:
            owner, flow, began, end = self._start(timeout)
            attempt = limited(self._attempt(owner), end)
            pending = self._pending.blocking(attempt)
            try:
                with call_ends_at(end.at):  # a blocking driver's sockets end with the call
                    outcome = drive(flow, attempt, self.name, pending)
            finally:
                self._pending.done(pending)
                attempt.close()
            return self._granted(owner, outcome, began, holder, traced)

    def _new_lease(self, terms: LeaseTerms) -> Lease:
        return Lease(self._backend, self._internals.holdings, terms)

    def _attempt(self, owner: str) -> Attempt:
        if self._share is None:
            return self._backend.attempt(self.name, owner, self.ttl, self.fair, self.renew)
        return self._shared_attempt(sharing(self._backend), owner)

    def try_acquire(self) -> Lease | None:
        """Try once: the :class:`Lease`, or None if another owner holds the lock."""
        try:
            return self._acquire(timeout=0)
        except LockTimeout:
            return None

    def locked(self) -> bool:
        """Whether anyone (this client or another) holds the lock now."""
        return is_held(self._backend.inspect(self.name))

    def contenders(self) -> list[Holder]:
        """Who holds the lock (first, if anyone does), then who waits for it, in line
        order, each as the :class:`~fencelock.holder.Holder` its owner value describes
        (host, PID, process start, program or label; :data:`~fencelock.holder.UNKNOWN`
        where it describes none). Only the holder on a backend that keeps no line of
        waiters (MySQL, Redlock). Two reads, no lock taken: a moment's picture.
        :class:`BackendUnavailable` if the server cannot be reached."""
        waiting = self._backend.waiters(self.name)
        return line_of(waiting, self._backend.inspect(self.name))

    def owned(self) -> bool:
        """Whether this thread holds the lock through this client, with a lease whose
        trusted time has not run out (no request: what the lease itself knows)."""
        return self._owned_by(this_thread())

    def __call__(self, func: Callable[P, R]) -> Callable[P, R]:
        """Decorate ``func`` so that its calls hold the lock, one at a time across every
        process (``@client.lock("name")``); each call waits up to the lock's ``timeout``."""
        if inspect.iscoroutinefunction(func):
            raise ConfigError(
                f"lock {self.name!r} is blocking and {func.__qualname__} is a coroutine "
                "function: decorate it with an asyncio client's lock "
                "(fencelock.aconnect(...).lock(name))"
            )

        @functools.wraps(func)
        def serialized(*args: P.args, **kwargs: P.kwargs) -> R:
            with self:
                return func(*args, **kwargs)

        return serialized

    def __enter__(self) -> Lease:
        lease = self._acquire(self.timeout)
        stopper = ThreadStopper(lease) if self.stop_on_loss and lease.depth == 1 else None
        return self._entering(this_thread(), lease, stopper)

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        with self._leaving(this_thread(), exc) as lease:
            if lease is not None:
                lease.release()


class AsyncLock(_LockBase[AsyncBackend, AsyncLease]):
    """A named lock for asyncio: ``async with lock as lease:``."""

    @overload
    async def acquire(
        self, timeout: float | None = None, *, blocking: Literal[True] = True
    ) -> AsyncLease: ...

    @overload
    async def acquire(self, *, blocking: bool) -> AsyncLease | None: ...

    async def acquire(
        self, timeout: float | None = None, *, blocking: bool = True
    ) -> AsyncLease | None:
        """Take the lock; same contract as :meth:`Lock.acquire` (per task, not thread)."""
        if blocking:
            return await self._acquire(timeout)
        self._refuse_a_timeout(timeout)
        return await self.try_acquire()

    async def _acquire(self, timeout: float | None, holder: object | None = None) -> AsyncLease:
        """:meth:`acquire`, for ``holder`` (a face's own) or this task."""
        holder = this_task() if holder is None else holder
        again = self._reenter(holder)
        if again is not None:
            return again
        with acquiring(self.name, timeout, self._backend.url) as traced:
            owner, flow, began, end = self._start(timeout)
            attempt = alimited(self._attempt(owner), self._backend.url, end)
            pending = self._pending.task()
            try:
                outcome = await adrive(flow, attempt, self.name)
            except asyncio.CancelledError:
                if not pending.requested:
                    raise
                self._pending.uncancel(pending)
                raise self._pending.cancelled() from None
            finally:
                self._pending.task_done(pending)
                await attempt.close()
            return self._granted(owner, outcome, began, holder, traced)

    def _new_lease(self, terms: LeaseTerms) -> AsyncLease:
        return AsyncLease(self._backend, self._internals.holdings, terms)

    def _attempt(self, owner: str) -> AsyncAttempt:
        if self._share is None:
            return self._backend.attempt(self.name, owner, self.ttl, self.fair, self.renew)
        return self._shared_attempt(async_sharing(self._backend), owner)

    async def try_acquire(self) -> AsyncLease | None:
        """Try once: the :class:`AsyncLease`, or None if another owner holds the lock."""
        try:
            return await self._acquire(timeout=0)
        except LockTimeout:
            return None

    async def locked(self) -> bool:
        """Whether anyone (this client or another) holds the lock now."""
        return is_held(await self._backend.inspect(self.name))

    async def contenders(self) -> list[Holder]:
        """The holder, then the waiters in line order; as :meth:`Lock.contenders`."""
        waiting = await self._backend.waiters(self.name)
        return line_of(waiting, await self._backend.inspect(self.name))

    def owned(self) -> bool:
        """Whether this task holds the lock through this client, with a lease whose
        trusted time has not run out (no request: what the lease itself knows)."""
        return self._owned_by(this_task())

    def __call__(
        self, func: Callable[P, Awaitable[R]]
    ) -> Callable[P, Coroutine[object, object, R]]:
        """Decorate coroutine function ``func`` so that its calls hold the lock, one at a
        time across every process; each call waits up to the lock's ``timeout``."""
        if not inspect.iscoroutinefunction(func):
            raise ConfigError(
                f"lock {self.name!r} is an asyncio lock and {func.__qualname__} is not a "
                "coroutine function: decorate it with a blocking client's lock "
                "(fencelock.connect(...).lock(name))"
            )

        @functools.wraps(func)
        async def serialized(*args: P.args, **kwargs: P.kwargs) -> R:
            async with self:
                return await func(*args, **kwargs)

        return serialized

    async def __aenter__(self) -> AsyncLease:
        lease = await self._acquire(self.timeout)
        stopper = TaskStopper(lease) if self.stop_on_loss and lease.depth == 1 else None
        return self._entering(this_task(), lease, stopper)

    async def __aexit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        with self._leaving(this_task(), exc) as lease:
            if lease is not None:
                await lease.release()
