"""``memory://[store]``: leases inside one process, for tests and single-process apps.

Clients that name the same store share it. Nothing survives the process.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from fencelock import clock
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


_STORES: dict[str, _Store] = {}
_STORES_LOCK = threading.Lock()


def _store(key: str) -> _Store:
    with _STORES_LOCK:
        return _STORES.setdefault(key, _Store())


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
        self._store = _store(parsed.hosts[0][0] if parsed.hosts else "")

    def attempt(self, name: str, owner: str, ttl: float, fair: bool = False) -> MemoryAttempt:
        return MemoryAttempt(self._store, name, owner, ttl)

    def release(self, name: str, owner: str) -> bool:
        with self._store.changed:
            slot = self._store.slots.get(name)
            if slot is None or slot.owner != owner or slot.expires_at <= clock.now():
                return False
            slot.owner, slot.releases = None, slot.releases + 1
            self._store.changed.notify_all()
            return True

    def renew(self, name: str, owner: str, ttl: float) -> bool:
        with self._store.changed:
            slot = self._store.slots.get(name)
            now = clock.now()
            if slot is None or slot.owner != owner or slot.expires_at <= now:
                return False
            slot.expires_at = now + ttl
            return True

    def inspect(self, name: str) -> LockInfo | None:
        with self._store.changed:
            slot = self._store.slots.get(name)
            return None if slot is None else self._info(name, slot, clock.now())

    def list(self, prefix: str) -> list[LockInfo]:
        with self._store.changed:
            now = clock.now()
            infos = (self._info(n, s, now) for n, s in self._store.slots.items())
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
