"""The leases one client holds, and which thread or task took each.

The client lists them (``held()``), releases the forgotten ones when it closes,
and refuses a holder that asks again for a name it holds (that would wait for
itself). Every lease also goes to the renewer from here.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from fencelock import forking
from fencelock.engine.lease_state import is_live
from fencelock.errors import AlreadyHeld, BackendUnavailable
from fencelock.lease import LeaseBase, Tracker

L = TypeVar("L", bound=LeaseBase)


class _ThreadMark:
    """One per thread, made on its first lock: unlike ``threading.get_ident()``, which
    Python hands to the next thread once this one ends, it is never anyone else's."""


_marks = threading.local()


def this_thread() -> object:
    """Who holds a lease taken by the sync client: the thread that took it."""
    mark = getattr(_marks, "mark", None)
    if mark is None:
        mark = _marks.mark = _ThreadMark()
    return mark


# Who holds a lease taken by the asyncio client: the task (an object nobody else reuses).
this_task: Callable[[], object] = asyncio.current_task


class Holdings(Generic[L]):
    """Leases taken through one client and not yet released, by name."""

    def __init__(self, renewer: Tracker[L]) -> None:
        self._renewer = renewer
        self._mutex = threading.Lock()
        self._by_name: dict[str, dict[L, object]] = {}
        self._closed = False
        forking.register(self)

    def close(self) -> list[L]:
        """Take no lease from now on (the client closes); the leases still unreleased."""
        self._closed = True
        return self.unreleased()

    def reenter(self, name: str, holder: object, reentrant: bool) -> L | None:
        """``holder``'s live re-entrant lease on ``name``, taken once more, if ``reentrant``
        and it has one; None if it holds none. Raises :class:`AlreadyHeld` if it holds
        one that cannot be re-entered (either side not re-entrant), and
        :class:`BackendUnavailable` once the client is closed: every acquire asks here."""
        if self._closed:
            raise BackendUnavailable(
                f"lock {name!r}: the client was closed; connect a new one to take locks"
            )
        holders = self._by_name.get(name)
        if not holders or holder not in holders.values():  # the usual case, lock-free
            return None
        with self._mutex:
            mine = [lease for lease, who in self._by_name.get(name, {}).items() if who == holder]
        live = [lease for lease in mine if is_live(lease.state)]
        if not live:
            return None
        if reentrant and live[0].reentrant:
            live[0]._enter_again()
            return live[0]
        who = "task" if isinstance(holder, asyncio.Task) else "thread"
        advice = (
            "it was taken without reentrant=True, so it cannot be taken again until it is "
            "released; take both with reentrant=True to nest them"
            if reentrant
            else "a lock made with reentrant=True can be taken again by the same holder"
        )
        raise AlreadyHeld(
            f"lock {name!r} is already held by this {who} through this client, and a "
            f"second acquire would wait for itself ({advice})"
        )

    def held_by(self, name: str, holder: object) -> list[L]:
        """``holder``'s live leases on ``name``."""
        with self._mutex:
            mine = [lease for lease, who in self._by_name.get(name, {}).items() if who == holder]
        return [lease for lease in mine if is_live(lease.state)]

    def holds_under(self, prefix: str, holder: object) -> bool:
        """Whether ``holder`` holds a live lease whose name starts with ``prefix``."""
        with self._mutex:
            mine = [
                lease
                for name, holders in self._by_name.items()
                if name.startswith(prefix)
                for lease, who in holders.items()
                if who == holder
            ]
        return any(is_live(lease.state) for lease in mine)

    def add(self, lease: L, holder: object) -> None:
        with self._mutex:
            self._by_name.setdefault(lease.name, {})[lease] = holder
        self._renewer.track(lease)

    def track(self, lease: L) -> None:
        self._renewer.track(lease)

    def forget(self, lease: L) -> None:
        self._renewer.forget(lease)
        with self._mutex:
            holders = self._by_name.get(lease.name, {})
            holders.pop(lease, None)
            if not holders:
                self._by_name.pop(lease.name, None)

    def held(self) -> list[L]:
        """The live leases, oldest name first."""
        return [lease for lease in self.unreleased() if is_live(lease.state)]

    def unreleased(self) -> list[L]:
        with self._mutex:
            return [lease for holders in self._by_name.values() for lease in holders]

    def _reset_after_fork(self) -> None:
        """A forked child holds none of its parent's leases: each is lost there."""
        for holders in self._by_name.values():
            for lease in holders:
                lease._reset_after_fork()
        self._mutex = threading.Lock()
        self._by_name = {}
