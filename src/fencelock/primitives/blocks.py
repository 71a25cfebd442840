"""Holds taken through a gate (a read-write lock's, a semaphore's permit), and ``with``
/ ``async with`` for the primitives whose ``acquire`` returns a hold: the hold is taken
on entry with the primitive's own timeout and given back on exit, by thread (or task),
innermost last, so one object serves nested and concurrent blocks. A failed give-back
raises, unless the block raised (which then stands)."""

from __future__ import annotations

from typing import Generic, Literal, Protocol, TypeVar, overload

from fencelock.client_leases import this_task, this_thread
from fencelock.errors import ConfigError, FencelockError, LockTimeout
from fencelock.lease import LeaseBase


class Releasable(Protocol):
    """A hold that can be given back (sync API)."""

    def release(self) -> None:
        """Give the hold back."""


class AsyncReleasable(Protocol):
    """A hold that can be given back (asyncio API)."""

    async def release(self) -> None:
        """Give the hold back."""


H = TypeVar("H", bound=Releasable)
A = TypeVar("A", bound=AsyncReleasable)


L = TypeVar("L", bound=LeaseBase)


class GateHold(Generic[L]):
    """A hold taken through a gate: the lease it is, and the token it was given at the
    gate (a read-write lock's hold, a semaphore's permit)."""

    def __init__(self, name: str, lease: L, token: int) -> None:
        self.name, self.lease, self.token = name, lease, token

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} token={self.token}>"

    @property
    def lost(self) -> bool:
        """True once the hold can no longer be trusted (never False again)."""
        return self.lease.lost

    def remaining(self) -> float:
        """Seconds it is still safe to act on this hold."""
        return self.lease.remaining()

    def check(self) -> None:
        """Raise :class:`LeaseLost` unless the hold is still held and trusted."""
        self.lease.check()


def _refuse_a_timeout(primitive: object, timeout: float | None) -> None:
    """``blocking=False`` is one try, no wait: a timeout cannot go with it."""
    if timeout is not None:
        raise ConfigError(
            f"{primitive!r}: acquire(blocking=False) tries once and never waits; give it no timeout"
        )


class HeldInBlocks(Generic[H]):
    """``with primitive as hold:`` over ``acquire(timeout)`` and ``hold.release()``;
    the subclass sets ``timeout`` and ``_entered = {}``."""

    timeout: float | None
    _entered: dict[object, list[H]]

    def _acquire(self, timeout: float | None) -> H:
        """Take the hold within ``timeout`` (each primitive says how)."""
        raise NotImplementedError

    @overload
    def acquire(self, timeout: float | None = None, *, blocking: Literal[True] = True) -> H: ...

    @overload
    def acquire(self, *, blocking: bool) -> H | None: ...

    def acquire(self, timeout: float | None = None, *, blocking: bool = True) -> H | None:
        """Take the hold within ``timeout`` (None: as long as it takes), or raise
        :class:`LockTimeout` with nothing held; ``blocking=False`` tries once and returns
        None instead (as a :class:`~fencelock.Lock` does)."""
        if blocking:
            return self._acquire(timeout)
        _refuse_a_timeout(self, timeout)
        return self.try_acquire()

    def try_acquire(self) -> H | None:
        """Try once: the hold, or None (nothing held)."""
        try:
            return self._acquire(0)
        except LockTimeout:
            return None

    def __enter__(self) -> H:
        hold = self.acquire(self.timeout)
        self._entered.setdefault(this_thread(), []).append(hold)
        return hold

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        hold = _leave(self._entered, this_thread())
        if hold is None:
            return
        try:
            hold.release()
        except FencelockError:
            if exc is None:
                raise


class AsyncHeldInBlocks(Generic[A]):
    """``async with primitive as hold:`` over ``await acquire(timeout)`` and release."""

    timeout: float | None
    _entered: dict[object, list[A]]

    async def _acquire(self, timeout: float | None) -> A:
        """Take the hold within ``timeout`` (each primitive says how)."""
        raise NotImplementedError

    @overload
    async def acquire(
        self, timeout: float | None = None, *, blocking: Literal[True] = True
    ) -> A: ...

    @overload
    async def acquire(self, *, blocking: bool) -> A | None: ...

    async def acquire(self, timeout: float | None = None, *, blocking: bool = True) -> A | None:
        """As :meth:`HeldInBlocks.acquire`, awaited."""
        if blocking:
            return await self._acquire(timeout)
        _refuse_a_timeout(self, timeout)
        return await self.try_acquire()

    async def try_acquire(self) -> A | None:
        """Try once: the hold, or None (nothing held)."""
        try:
            return await self._acquire(0)
        except LockTimeout:
            return None

    async def __aenter__(self) -> A:
        hold = await self.acquire(self.timeout)
        self._entered.setdefault(this_task(), []).append(hold)
        return hold

    async def __aexit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        hold = _leave(self._entered, this_task())
        if hold is None:
            return
        try:
            await hold.release()
        except FencelockError:
            if exc is None:
                raise


T = TypeVar("T")


def _leave(entered: dict[object, list[T]], holder: object) -> T | None:
    """The innermost hold ``holder`` entered and has not left; None if there is none."""
    stack = entered.get(holder)
    if not stack:
        return None
    hold = stack.pop()
    if not stack:
        del entered[holder]
    return hold
