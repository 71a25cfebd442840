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
from fencelock.errors import AlreadyHeld
from fencelock.lease import LeaseBase, Tracker

L = TypeVar("L", bound=LeaseBase)


# Who holds a lease: the thread (sync client) or the asyncio task that took it.
this_thread: Callable[[], object] = threading.get_ident
this_task: Callable[[], object] = asyncio.current_task


class Holdings(Generic[L]):
    """Leases taken through one client and not yet released, by name."""

    def __init__(self, renewer: Tracker[L]) -> None:
        self._renewer = renewer
        self._mutex = threading.Lock()
        self._by_name: dict[str, dict[L, object]] = {}
        forking.register(self)

    def refuse_reentry(self, name: str, holder: object) -> None:
        """Raise :class:`AlreadyHeld` if ``holder`` holds a live lease on ``name``."""
        holders = self._by_name.get(name)
        if holders and holder in holders.values():  # rare: then look closer
            self._refuse_if_live(name, holder)

    def _refuse_if_live(self, name: str, holder: object) -> None:
        with self._mutex:
            mine = [lease for lease, who in self._by_name.get(name, {}).items() if who == holder]
        if any(is_live(lease.state) for lease in mine):
            raise AlreadyHeld(
                f"lock {name!r} is already held by this "
                f"{'task' if isinstance(holder, asyncio.Task) else 'thread'} through this "
                "client; fencelock locks are not re-entrant (a second acquire would wait "
                "for itself)"
            )

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
