"""``memory://[store]``: leases inside one process, for tests and single-process apps.

Clients that name the same store share it. Nothing survives the process, and
nothing crosses a fork: a forked child starts with no stores, and a client it
inherited from its parent refuses to work (ConfigError) rather than hand out
leases and tokens that its parent and siblings hand out too.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

from fencelock import clock, forking
from fencelock.backends.base import Acquired, AttemptResult, Busy, LockInfo
from fencelock.engine.urls import ParsedURL, reject_unknown_options
from fencelock.errors import ConfigError


@dataclass
class _Slot:
    owner: str | None = None
    token: int = 0
    expires_at: float = 0.0
    releases: int = 0
    waiters: int = 0


class _Store:
    def __init__(self) -> None:
        self.slots: dict[str, _Slot] = {}
        self.changed = threading.Condition()


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
    def __init__(self, store: _Store, name: str, owner: str, ttl: float) -> None:
        self._store, self._name, self._owner, self._ttl = store, name, owner, ttl
        self._seen_releases = 0
        self._waiting = False

    def try_acquire(self) -> AttemptResult:
        with self._store.changed:
            slot = self._store.slots.setdefault(self._name, _Slot())
            now = clock.now()
            if slot.owner is None or slot.expires_at <= now:
                slot.owner, slot.token = self._owner, slot.token + 1
                slot.expires_at = now + self._ttl
                return Acquired(slot.token)
            self._seen_releases = slot.releases
            if not self._waiting:
                self._waiting, slot.waiters = True, slot.waiters + 1
            return Busy(slot.expires_at - now)

    def wait(self, timeout: float) -> None:
        with self._store.changed:
            slot = self._store.slots[self._name]
            self._store.changed.wait_for(lambda: slot.releases != self._seen_releases, timeout)

    def close(self) -> None:
        if self._waiting:
            with self._store.changed:
                self._store.slots[self._name].waiters -= 1
            self._waiting = False


class MemoryBackend:
    """Leases in this process's memory."""

    supports_fair = False

    def __init__(self, parsed: ParsedURL) -> None:
        reject_unknown_options(parsed, set())
        if parsed.hosts and len(parsed.hosts) > 1:
            raise ConfigError(f"memory:// takes one store name, got {parsed.redacted!r}")
        self.url = parsed.redacted
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

    def attempt(self, name: str, owner: str, ttl: float, fair: bool = False) -> MemoryAttempt:
        return MemoryAttempt(self._here(), name, owner, ttl)

    def release(self, name: str, owner: str) -> bool:
        store = self._here()
        with store.changed:
            slot = store.slots.get(name)
            if slot is None or slot.owner != owner or slot.expires_at <= clock.now():
                return False
            slot.owner, slot.releases = None, slot.releases + 1
            store.changed.notify_all()
            return True

    def renew(self, name: str, owner: str, ttl: float) -> bool:
        store = self._here()
        with store.changed:
            slot = store.slots.get(name)
            now = clock.now()
            if slot is None or slot.owner != owner or slot.expires_at <= now:
                return False
            slot.expires_at = now + ttl
            return True

    def inspect(self, name: str) -> LockInfo | None:
        store = self._here()
        with store.changed:
            slot = store.slots.get(name)
            return None if slot is None else self._info(name, slot, clock.now())

    def list(self, prefix: str) -> list[LockInfo]:
        store = self._here()
        with store.changed:
            now = clock.now()
            infos = (self._info(n, s, now) for n, s in store.slots.items())
            return sorted(
                (i for i in infos if i.held and i.name.startswith(prefix)), key=lambda i: i.name
            )

    @staticmethod
    def _info(name: str, slot: _Slot, now: float) -> LockInfo:
        live = slot.owner is not None and slot.expires_at > now
        return LockInfo(
            name=name,
            owner=slot.owner if live else None,
            token=slot.token,
            remaining=slot.expires_at - now if live else None,
            waiters=slot.waiters,
        )

    def close(self) -> None:
        """Nothing to close: the store lives as long as the process."""
