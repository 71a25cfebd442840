"""Multi-locks: several names held all or nothing, as one (Redisson's MultiLock).

The names are taken in one global order (:mod:`fencelock.engine.multi`), so two
multi-locks over overlapping names never deadlock. Each name is an ordinary lease
with its own token and renewal; the multi-lease is lost the moment any of them is,
and its release gives back every one.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from fencelock import clock
from fencelock.engine.multi import MultiFlow, multi_acquire_flow, ordered
from fencelock.engine.operations import Blocked
from fencelock.engine.timing import validate_timeout
from fencelock.errors import LeaseLost, LockTimeout
from fencelock.lease import AsyncLease, Lease, LeaseBase
from fencelock.primitives.blocks import AsyncHeldInBlocks, HeldInBlocks
from fencelock.primitives.client_like import AsyncClientLike, ClientLike
from fencelock.primitives.flow_leases import AsyncFlowLeases, FlowLeases

L = TypeVar("L", bound=LeaseBase)
M = TypeVar("M", bound="_MultiLeaseBase[Any]")
C = TypeVar("C", ClientLike, AsyncClientLike)


def _blocked(names: tuple[str, ...], blocked: Blocked) -> LockTimeout:
    return LockTimeout(
        f"multi-lock over {len(names)} names not acquired: {blocked.name!r} stayed held by "
        f"another owner for {blocked.waited:.3f}s; nothing is held"
    )


class _MultiLeaseBase(Generic[L]):
    """The members' leases, in order, seen as one; no I/O here."""

    def __init__(self, leases: list[L]) -> None:
        self.leases: dict[str, L] = {lease.name: lease for lease in leases}
        self._guard = threading.Lock()
        self._callbacks: list[Callable[[], object]] = []
        self._fired = False
        for lease in leases:
            lease.on_lost(self._member_lost)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {list(self.leases)} tokens={self.tokens}>"

    def __getitem__(self, name: str) -> L:
        """The member lease of ``name``."""
        return self.leases[name]

    @property
    def names(self) -> tuple[str, ...]:
        """The names held, in the order they were taken."""
        return tuple(self.leases)

    @property
    def tokens(self) -> dict[str, int]:
        """Each name's fencing token: pass each resource the token of its own name."""
        return {name: lease.token for name, lease in self.leases.items()}

    @property
    def lost(self) -> bool:
        """True once any member is lost: the multi-lease is then lost as a whole."""
        return any(lease.lost for lease in self.leases.values())

    @property
    def lost_reason(self) -> str | None:
        """Which member was lost first, and why; None while none is."""
        for name, lease in self.leases.items():
            if lease.lost:
                return f"{name!r}: {lease.lost_reason}"
        return None

    def remaining(self) -> float:
        """Seconds it is still safe to act on every member (the least of theirs)."""
        return min(lease.remaining() for lease in self.leases.values())

    def check(self) -> None:
        """Raise :class:`LeaseLost` unless every member is held and trusted."""
        for lease in self.leases.values():
            lease.check()

    def on_lost(self: M, callback: Callable[[M], object]) -> None:
        """Call ``callback(multi_lease)`` once, when the first member is lost."""
        bound = functools.partial(callback, self)
        with self._guard:
            if not self._fired:
                self._callbacks.append(bound)
                return
        bound()

    def _member_lost(self, _lease: LeaseBase) -> None:
        with self._guard:
            if self._fired:
                return
            self._fired, callbacks = True, self._callbacks
            self._callbacks = []
        for callback in callbacks:
            callback()

    def _settle_release(self, failures: list[LeaseLost]) -> None:
        if failures:
            raise LeaseLost(
                "multi-lease lost before release: "
                + "; ".join(str(failure) for failure in failures)
            ) from failures[0]


class MultiLease(_MultiLeaseBase[Lease]):
    """Several held leases as one (sync API): ``tokens``, ``check()``, ``release()``."""

    def extend(self, ttl: float | None = None) -> None:
        """Extend every member; raises :class:`LeaseLost` if one is lost."""
        for lease in self.leases.values():
            lease.extend(ttl)

    def release(self) -> None:
        """Give every member back (newest first); :class:`LeaseLost` after all are given
        back if any was lost before."""
        failures: list[LeaseLost] = []
        for lease in reversed(self.leases.values()):
            try:
                lease.release()
            except LeaseLost as exc:
                failures.append(exc)
        self._settle_release(failures)

    def wait_lost(self, timeout: float | None = None) -> bool:
        """Block until a member is lost (True) or ``timeout`` passes (False)."""
        event = threading.Event()
        self.on_lost(lambda _multi: event.set())
        return event.wait(timeout) or self.lost


class AsyncMultiLease(_MultiLeaseBase[AsyncLease]):
    """Several held leases as one (asyncio API)."""

    async def extend(self, ttl: float | None = None) -> None:
        """Extend every member; raises :class:`LeaseLost` if one is lost."""
        for lease in self.leases.values():
            await lease.extend(ttl)

    async def release(self) -> None:
        """Give every member back; as :meth:`MultiLease.release`."""
        failures: list[LeaseLost] = []
        for lease in reversed(self.leases.values()):
            try:
                await lease.release()
            except LeaseLost as exc:
                failures.append(exc)
        self._settle_release(failures)


class _MultiLockBase(Generic[C, M]):
    def __init__(
        self,
        client: C,
        names: Iterable[str],
        ttl: float,
        renew: bool = True,
        timeout: float | None = None,
    ) -> None:
        self._client: C = client
        self._entered: dict[object, list[M]] = {}  # by thread or task, innermost last
        self.names = ordered(names)
        self.ttl, self.renew = ttl, renew
        self.timeout = validate_timeout(timeout)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {list(self.names)} ttl={self.ttl}>"

    def _flow(self, timeout: float | None) -> MultiFlow:
        return multi_acquire_flow(self.names, validate_timeout(timeout), clock.now())


class MultiLock(_MultiLockBase[ClientLike, MultiLease], HeldInBlocks[MultiLease]):
    """Several names locked all or nothing: ``with client.multi_lock([a, b]) as multi:``."""

    def _acquire(self, timeout: float | None) -> MultiLease:
        """Take every name, in order, within one ``timeout``; :class:`LockTimeout` (with
        nothing held) if one stays held by another owner."""
        leases = FlowLeases(self._client, self.ttl, self.renew)
        blocked = leases.run(self._flow(timeout))
        if blocked is not None:
            leases.give_back_all()
            raise _blocked(self.names, blocked)
        return MultiLease(list(leases.taken.values()))


class AsyncMultiLock(
    _MultiLockBase[AsyncClientLike, AsyncMultiLease], AsyncHeldInBlocks[AsyncMultiLease]
):
    """Several names locked all or nothing, for asyncio: ``async with``."""

    async def _acquire(self, timeout: float | None) -> AsyncMultiLease:
        """Take every name; as :meth:`MultiLock.acquire`."""
        leases = AsyncFlowLeases(self._client, self.ttl, self.renew)
        blocked = await leases.run(self._flow(timeout))
        if blocked is not None:
            await leases.give_back_all()
            raise _blocked(self.names, blocked)
        return AsyncMultiLease(list(leases.taken.values()))
