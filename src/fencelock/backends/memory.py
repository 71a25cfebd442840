"""``memory://[store]``: leases inside one process, for tests and single-process apps.

Clients that name the same store share it. Nothing survives the process. Waiters
queue as on SQLite: a release wakes the oldest one only, and who may take a free
lease while others wait is :mod:`fencelock.engine.barging`'s rule.

Nothing crosses a fork: a forked child starts with no stores, and a client it
inherited from its parent refuses to work (ConfigError) rather than hand out
leases and tokens that its parent and siblings hand out too.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from fencelock import clock, forking
from fencelock.backends.base import Acquired, AttemptResult, Busy, Capabilities, LockInfo, Renewal
from fencelock.backends.threaded import ThreadedAsyncBackend
from fencelock.engine import barging
from fencelock.engine.urls import (
    COMMON_OPTIONS,
    ParsedURL,
    number_option,
    reject_unknown_options,
)
from fencelock.errors import ConfigError


class _WakeUp(threading.Event):
    """A queued waiter's wake-up, carrying the waiter's owner value (``waiters``)."""

    def __init__(self, owner: str) -> None:
        super().__init__()
        self.owner = owner


@dataclass
class _Slot:
    owner: str | None = None
    token: int = 0
    since: float = 0.0  # Unix time of the grant
    expires_at: float = 0.0
    # Waiters in arrival order, keyed by the event that wakes them.
    queue: dict[_WakeUp, barging.Waiter[_WakeUp]] = field(default_factory=dict)

    def free(self, now: float) -> bool:
        return self.owner is None or self.expires_at <= now

    def wake_head(self, now: float) -> None:
        """Wake the oldest live waiter only (one release, one wake-up)."""
        if not self.queue:
            return
        head, _expired = barging.oldest_live(self.queue.values(), now)
        if head is not None:
            head.key.set()


class _Store:
    def __init__(self) -> None:
        self.slots: dict[str, _Slot] = {}
        self.mutex = threading.Lock()


class _Stores:
    """This process's stores by name."""

    def __init__(self) -> None:
        self._reset_after_fork()
        forking.register(self)

    def _reset_after_fork(self) -> None:
        self._by_name: dict[str, _Store] = {}
        self._guard = threading.Lock()

    def get(self, key: str) -> _Store:
        with self._guard:
            return self._by_name.setdefault(key, _Store())


_STORES = _Stores()


class MemoryAttempt:
    """One acquisition; queued (under its wake-up event) once it has found the lease busy."""

    def __init__(self, store: _Store, name: str, owner: str, ttl: float, bound: float) -> None:
        self._store, self._name, self._owner, self._ttl = store, name, owner, ttl
        self._bound = bound
        self._wake_up: _WakeUp | None = None  # made when it first has to wait

    def try_acquire(self) -> AttemptResult:
        with self._store.mutex:
            slot = self._store.slots.setdefault(self._name, _Slot())
            now = clock.now()
            if not slot.free(now):
                return self._queue(slot, now, slot.expires_at - now)
            if slot.queue:
                verdict = barging.handoff(slot.queue.values(), self._wake_up, now, self._bound)
                for wake_up in verdict.expired:
                    del slot.queue[wake_up]
                if not verdict.may_take:
                    return self._queue(slot, now, None)  # kept for the oldest waiter
                if self._wake_up is not None:
                    slot.queue.pop(self._wake_up, None)
            slot.owner, slot.token, slot.since = self._owner, slot.token + 1, time.time()
            slot.expires_at = now + self._ttl
            return Acquired(slot.token)

    def _queue(self, slot: _Slot, now: float, holder_remaining: float | None) -> Busy:
        """Join the queue, or refresh our place in it (keeping our arrival time)."""
        if self._wake_up is None:
            self._wake_up = _WakeUp(self._owner)
        queued = slot.queue.get(self._wake_up)
        arrived = now if queued is None else queued.arrived
        slot.queue[self._wake_up] = barging.Waiter(self._wake_up, arrived, barging.alive_until(now))
        return Busy(barging.busy_wait(holder_remaining))

    def interrupt(self) -> None:
        wake_up = self._wake_up
        if wake_up is not None:
            wake_up.set()

    def wait(self, timeout: float) -> None:
        if self._wake_up is None:  # never queued (it cannot happen: a wait follows a Busy)
            return
        self._wake_up.wait(timeout)
        self._wake_up.clear()

    def close(self) -> None:
        if self._wake_up is None:
            return  # never queued: nothing to leave
        with self._store.mutex:
            slot = self._store.slots.get(self._name)
            if slot is not None and slot.queue.pop(self._wake_up, None) is not None:
                now = clock.now()
                if slot.free(now):  # we may have been woken for it: pass the wake-up on
                    slot.wake_head(now)
        self._wake_up.set()  # a wait still blocked in a thread (a cancelled task) returns


class MemoryBackend:
    """Leases in this process's memory."""

    capabilities = Capabilities(
        fair=True,
        renews_in_batches=True,
    )

    def outlives_client(self, renewed: bool) -> bool:
        """Whether a lease left to its TTL stays on the server after the client closes."""
        return True  # the store is the process's, not the client's

    def __init__(self, parsed: ParsedURL) -> None:
        reject_unknown_options(parsed, COMMON_OPTIONS)
        for option in COMMON_OPTIONS:  # checked, then ignored: nothing here waits on I/O
            number_option(parsed, option, 1.0)
        if parsed.hosts and len(parsed.hosts) > 1:
            raise ConfigError(f"memory:// takes one store name, got {parsed.redacted!r}")
        if parsed.username is not None or parsed.password is not None:
            raise ConfigError(f"memory:// takes no user or password, got {parsed.redacted!r}")
        if parsed.hosts and parsed.hosts[0][1] is not None:
            raise ConfigError(f"memory:// takes a store name, not a port: {parsed.redacted!r}")
        self.url = parsed.redacted
        self.request_bound = parsed.request_bound
        self._store = _STORES.get(parsed.hosts[0][0] if parsed.hosts else "")
        self._created_in = os.getpid()
        self._forked = False
        forking.register(self)

    def _reset_after_fork(self) -> None:
        self._forked = True

    def _here(self) -> _Store:
        """The store, unless this is a forked child's copy of its parent's client."""
        if self._forked:
            raise ConfigError(
                f"this {self.url} client was connected in process {self._created_in}, and "
                f"memory:// leases live in one process only: process {os.getpid()} was forked "
                "from it. Connect in the child, or use sqlite:// or redis:// to lock "
                "across processes"
            )
        return self._store

    def attempt(
        self, name: str, owner: str, ttl: float, fair: bool = False, renewed: bool = True
    ) -> MemoryAttempt:
        return MemoryAttempt(self._here(), name, owner, ttl, barging.starvation_bound(fair))

    def release(self, name: str, owner: str) -> bool:
        with self._held_by(name, owner) as (slot, now):
            if slot is not None:
                slot.owner = None
                slot.wake_head(now)
        return slot is not None

    def renew(self, name: str, owner: str, ttl: float) -> bool:
        with self._held_by(name, owner) as (slot, now):
            if slot is not None:
                slot.expires_at = now + ttl
        return slot is not None

    def renew_many(self, renewals: Sequence[Renewal]) -> list[bool]:
        return [self.renew(name, owner, ttl) for name, owner, ttl in renewals]

    @contextlib.contextmanager
    def _held_by(self, name: str, owner: str) -> Iterator[tuple[_Slot | None, float]]:
        """Under the store's lock: ``name``'s slot if ``owner`` holds it now, and the time."""
        store = self._here()
        with store.mutex:
            slot = store.slots.get(name)
            now = clock.now()
            live = slot is not None and slot.owner == owner and slot.expires_at > now
            yield (slot if live else None), now

    def inspect(self, name: str) -> LockInfo | None:
        store = self._here()
        with store.mutex:
            slot = store.slots.get(name)
            return None if slot is None else self._info(name, slot, clock.now())

    def list(self, prefix: str) -> list[LockInfo]:
        store = self._here()
        with store.mutex:
            now = clock.now()
            infos = (self._info(n, s, now) for n, s in store.slots.items())
            return sorted(
                (i for i in infos if i.held and i.name.startswith(prefix)), key=lambda i: i.name
            )

    def waiters(self, name: str) -> builtins.list[str]:
        """The owners of ``name``'s live waiters, in arrival order."""
        store = self._here()
        with store.mutex:
            slot, now = store.slots.get(name), clock.now()
            queue = () if slot is None else slot.queue.values()
            return [w.key.owner for w in queue if w.alive_until > now]

    @staticmethod
    def _info(name: str, slot: _Slot, now: float) -> LockInfo:
        live = slot.owner is not None and slot.expires_at > now
        return LockInfo(
            name=name,
            owner=slot.owner if live else None,
            token=slot.token,
            remaining=slot.expires_at - now if live else None,
            waiters=len(slot.queue),
            since=slot.since if live else None,
        )

    def close(self) -> None:
        """Nothing to close: the store lives as long as the process."""


def open_sync(parsed: ParsedURL) -> MemoryBackend:
    return MemoryBackend(parsed)


def open_async(parsed: ParsedURL) -> ThreadedAsyncBackend:
    return ThreadedAsyncBackend(MemoryBackend(parsed))
