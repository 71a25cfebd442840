"""Leases: what you hold while you hold a lock."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from fencelock import clock, forking
from fencelock.engine import timing
from fencelock.engine.lease_state import LeaseEvent, LeaseState, is_live, transition
from fencelock.errors import LeaseLost

if TYPE_CHECKING:
    from fencelock.backends.base import AsyncBackend, Backend
    from fencelock.renewal import AsyncRenewer, Renewer

log = logging.getLogger("fencelock")
L = TypeVar("L", bound="LeaseBase")


@dataclass(frozen=True)
class LeaseTerms:
    """What an acquisition granted: who, which token, for how long, trusted until when."""

    name: str
    owner: str
    token: int
    ttl: float
    renew: bool
    trusted_until: float


class LeaseBase:
    """State shared by :class:`Lease` and :class:`AsyncLease`; no I/O here."""

    def __init__(self, terms: LeaseTerms) -> None:
        self.name = terms.name
        self.owner = terms.owner
        self.token = terms.token
        self.ttl = terms.ttl
        self.renews = terms.renew
        self.trusted_until = terms.trusted_until
        self.lost_reason: str | None = None
        self._state = LeaseState.HELD
        self._guard = threading.Lock()
        self._lost: threading.Event | None = None  # made on first wait_lost()
        self._callbacks: list[Callable[[LeaseBase], object]] = []
        self.schedule_version = 0
        self._inherited = False  # a forked child's copy of its parent's lease
        forking.register(self)

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} {self.name!r} token={self.token} "
            f"owner={self.owner[:8]} {self.state.value}>"
        )

    @property
    def state(self) -> LeaseState:
        self._notice_expiry()
        return self._state

    @property
    def lost(self) -> bool:
        """True once the lease can no longer be trusted. It never becomes False again."""
        return self.state is LeaseState.LOST

    @property
    def released(self) -> bool:
        return self._state is LeaseState.RELEASED

    def remaining(self) -> float:
        """Seconds it is still safe to act on this lease (0 once lost or released)."""
        if not is_live(self.state):
            return 0.0
        return max(self.trusted_until - clock.now(), 0.0)

    def check(self) -> None:
        """Raise :class:`LeaseLost` unless the lease is held and inside its safe time."""
        state = self.state
        if state is LeaseState.LOST:
            raise LeaseLost(f"lease on {self.name!r} (token {self.token}) lost: {self.lost_reason}")
        if state is LeaseState.RELEASED:
            raise LeaseLost(f"lease on {self.name!r} (token {self.token}) was released")

    def on_lost(self: L, callback: Callable[[L], object]) -> None:
        """Call ``callback(lease)`` once when the lease is lost (now, if it already is).

        Callbacks run on whichever thread notices the loss first: the renewer,
        or a caller of ``lost``/``check()``. Keep them short; exceptions are logged.
        """
        with self._guard:
            if self._state is not LeaseState.LOST:
                self._callbacks.append(callback)  # type: ignore[arg-type]
                return
        self._run_callback(callback)  # type: ignore[arg-type]

    def wait_lost(self, timeout: float | None = None) -> bool:
        """Block until the lease is lost (True) or ``timeout`` passes (False)."""
        with self._guard:
            if self._lost is None:
                self._lost = threading.Event()
                if self._state is LeaseState.LOST:
                    self._lost.set()
            event = self._lost
        return event.wait(timeout)

    def apply(self, event: LeaseEvent, reason: str | None = None) -> None:
        """Move through the lease state table; on entering LOST, run the callbacks."""
        with self._guard:
            before = self._state
            self._state = transition(before, event)
            newly_lost = self._state is LeaseState.LOST and before is not LeaseState.LOST
            if newly_lost:
                self.lost_reason = reason or event.value
                callbacks, self._callbacks = self._callbacks, []
        if newly_lost:
            log.warning(
                "fencelock: lease on %r (token %d) lost: %s",
                self.name,
                self.token,
                self.lost_reason,
            )
            with self._guard:
                if self._lost is not None:
                    self._lost.set()
            for callback in callbacks:
                self._run_callback(callback)

    def renewed(self, started: float, ttl: float) -> None:
        """The server extended the lease by ``ttl`` in a request sent at ``started``."""
        with self._guard:
            if is_live(self._state):
                self.ttl = ttl
                self.trusted_until = timing.trusted_until(started, ttl)
        self.apply(LeaseEvent.RENEWED)

    def _reset_after_fork(self) -> None:
        """In a forked child: the parent holds this lease, this process does not.

        It is lost here, without running the parent's callbacks, and neither renewed
        nor released from here.
        """
        self._guard = threading.Lock()  # a parent thread may have held it
        self._lost, self._callbacks, self._inherited = None, [], True
        if is_live(self._state):
            self._state = transition(self._state, LeaseEvent.FORKED)
            self.lost_reason = (
                f"held by process {os.getppid()}; a process forked from it holds none of its leases"
            )

    def _notice_expiry(self) -> None:
        if is_live(self._state) and clock.now() >= self.trusted_until:
            self.apply(LeaseEvent.SAFE_TIME_PASSED, "its TTL ran out before it was renewed")

    def _run_callback(self, callback: Callable[[LeaseBase], object]) -> None:
        try:
            callback(self)
        except Exception:
            log.exception("fencelock: on_lost callback for %r failed", self.name)

    def _begin_extend(self, ttl: float | None) -> tuple[float, float]:
        new_ttl = self.ttl if ttl is None else timing.validate_ttl(ttl)
        self.check()
        return new_ttl, clock.now()

    def _finish_extend(self, extended: bool, ttl: float, started: float) -> None:
        if not extended:
            self.apply(LeaseEvent.RENEW_REJECTED, "another owner had it at extend")
            self.check()
        self.renewed(started, ttl)

    def _finish_release(self, released_on_server: bool) -> None:
        was_lost = self.lost
        if not released_on_server and not was_lost:
            self.apply(LeaseEvent.RENEW_REJECTED, "another owner had it at release")
        self.apply(LeaseEvent.RELEASED)
        if was_lost or not released_on_server:
            self._raise_lost_before_release()

    def _raise_lost_before_release(self) -> None:
        raise LeaseLost(
            f"lease on {self.name!r} (token {self.token}) was lost before release: "
            f"{self.lost_reason}; the work done under it was not protected"
        )


class Lease(LeaseBase):
    """A held lease (sync API). ``token`` is the fencing token to pass to resources."""

    def __init__(self, backend: Backend, renewer: Renewer, terms: LeaseTerms) -> None:
        super().__init__(terms)
        self._backend, self._renewer = backend, renewer

    def extend(self, ttl: float | None = None) -> None:
        """Extend the lease to ``ttl`` seconds from now (default: its TTL).

        Raises :class:`LeaseLost` if it is already lost or another owner has it.
        """
        new_ttl, started = self._begin_extend(ttl)
        extended = self._backend.renew(self.name, self.owner, new_ttl)
        self._finish_extend(extended, new_ttl, started)
        self._renewer.track(self)

    def release(self) -> None:
        """Give the lease back. Releasing twice is a no-op.

        Raises :class:`LeaseLost` if the lease had been lost before this call:
        the work done under it was not protected by the lock.
        """
        if self.released:
            return
        self._renewer.forget(self)
        self._finish_release(not self._inherited and self._backend.release(self.name, self.owner))


class AsyncLease(LeaseBase):
    """A held lease (asyncio API)."""

    def __init__(self, backend: AsyncBackend, renewer: AsyncRenewer, terms: LeaseTerms) -> None:
        super().__init__(terms)
        self._backend, self._renewer = backend, renewer

    async def extend(self, ttl: float | None = None) -> None:
        """Extend the lease to ``ttl`` seconds from now; raises :class:`LeaseLost`."""
        new_ttl, started = self._begin_extend(ttl)
        extended = await self._backend.renew(self.name, self.owner, new_ttl)
        self._finish_extend(extended, new_ttl, started)
        self._renewer.track(self)

    async def release(self) -> None:
        """Give the lease back; raises :class:`LeaseLost` if it was lost before."""
        if self.released:
            return
        self._renewer.forget(self)
        self._finish_release(
            not self._inherited and await self._backend.release(self.name, self.owner)
        )


__all__ = ["AsyncLease", "Lease", "LeaseBase", "LeaseTerms"]
