"""The locks a benchmark runs: fencelock's and a peer's, as cycles and as contended lockers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import fencelock
from harness.workers import ACQUIRE_TIMEOUT


class NotAcquired(TimeoutError):
    """A peer's acquire call returned False instead of raising."""


def fencelock_cycle(
    lock: fencelock.Lock, timeout: float | None = ACQUIRE_TIMEOUT
) -> Callable[[], int]:
    """One acquire+release of a blocking fencelock lock; returns the fencing token."""

    def cycle() -> int:
        lease = lock.acquire(timeout=timeout)
        lease.release()
        return lease.token

    return cycle


def afencelock_cycle(
    lock: fencelock.AsyncLock, timeout: float | None = ACQUIRE_TIMEOUT
) -> Callable[[], Awaitable[int]]:
    """One acquire+release of an asyncio fencelock lock; returns the fencing token."""

    async def cycle() -> int:
        lease = await lock.acquire(timeout=timeout)
        await lease.release()
        return lease.token

    return cycle


def acquire_release(lock: Any, what: str = "", **acquire: Any) -> Callable[[], int]:
    """One cycle of a peer's lock object: ``acquire(**acquire)``, then ``release()``.

    With ``what``, an acquire that returns False raises :class:`NotAcquired`."""

    def cycle() -> int:
        if not lock.acquire(**acquire) and what:
            raise NotAcquired(f"{what} not acquired")
        lock.release()
        return -1

    return cycle


class FencelockLocker:
    """A contended worker's fencelock lock (the harness's ``Locker``)."""

    def __init__(self, url: str, name: str, **options: Any) -> None:
        self._client = fencelock.connect(url)
        if not options.get("fair", True):
            del options["fair"]  # only ask for fairness where it is wanted (and offered)
        self._lock = self._client.lock(name, **options)
        self._lease: fencelock.Lease | None = None

    def acquire(self) -> int:
        self._lease = self._lock.acquire(timeout=ACQUIRE_TIMEOUT)
        return self._lease.token

    def release(self) -> None:
        if self._lease is not None:
            lease, self._lease = self._lease, None
            lease.release()

    def close(self) -> None:
        self.release()
        self._client.close()


class PeerLocker:
    """A contended worker's peer lock, whose ``acquire(**acquire)`` returns False when it
    gives up; ``closer`` closes its client."""

    def __init__(self, lock: Any, closer: Callable[[], object], what: str, **acquire: Any):
        self._lock, self._closer, self._what, self._acquire = lock, closer, what, acquire
        self._held = False

    def acquire(self) -> int:
        if not self._lock.acquire(**self._acquire):
            raise NotAcquired(f"{self._what} not acquired within {ACQUIRE_TIMEOUT:g} s")
        self._held = True
        return -1

    def release(self) -> None:
        if self._held:
            self._held = False
            self._lock.release()

    def close(self) -> None:
        self.release()
        self._closer()
