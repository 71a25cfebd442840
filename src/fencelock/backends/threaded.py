"""An asyncio face for a backend whose driver is blocking (``sqlite3``, in-process memory).

Short operations run on a small thread pool; waits run on their own pool so
that many waiting tasks never starve renewals of threads. One adapter, not a
second implementation of each backend.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from fencelock import forking
from fencelock.backends.base import Attempt, AttemptResult, Backend, LockInfo

T = TypeVar("T")


class _Pools:
    def __init__(self) -> None:
        self._start()
        forking.register(self)

    def _start(self) -> None:
        self.ops = ThreadPoolExecutor(max_workers=4, thread_name_prefix="fencelock-op")
        self.waits = ThreadPoolExecutor(max_workers=256, thread_name_prefix="fencelock-wait")

    def _reset_after_fork(self) -> None:
        """In a forked child: the parent's pools have no threads here; work would never run."""
        self._start()

    async def run(self, pool: ThreadPoolExecutor, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(pool, fn)

    def shutdown(self) -> None:
        self.ops.shutdown(wait=True)
        self.waits.shutdown(wait=False, cancel_futures=True)


class ThreadedAsyncAttempt:
    def __init__(self, attempt: Attempt, pools: _Pools) -> None:
        self._attempt, self._pools = attempt, pools

    async def try_acquire(self) -> AttemptResult:
        return await self._pools.run(self._pools.ops, self._attempt.try_acquire)

    async def wait(self, timeout: float) -> None:
        await self._pools.run(self._pools.waits, functools.partial(self._attempt.wait, timeout))

    async def close(self) -> None:
        # Closing also wakes a wait still blocked in its thread after a cancellation.
        await self._pools.run(self._pools.ops, self._attempt.close)


class ThreadedAsyncBackend:
    """Runs a blocking :class:`Backend` in threads behind the async protocol."""

    def __init__(self, backend: Backend) -> None:
        self.sync = backend
        self.url = backend.url
        self.supports_fair = backend.supports_fair
        self._pools = _Pools()

    async def open(self) -> None:
        """The blocking backend connected when it was made."""

    def attempt(
        self, name: str, owner: str, ttl: float, fair: bool = False
    ) -> ThreadedAsyncAttempt:
        return ThreadedAsyncAttempt(self.sync.attempt(name, owner, ttl, fair), self._pools)

    async def release(self, name: str, owner: str) -> bool:
        return await self._pools.run(
            self._pools.ops, functools.partial(self.sync.release, name, owner)
        )

    async def renew(self, name: str, owner: str, ttl: float) -> bool:
        return await self._pools.run(
            self._pools.ops, functools.partial(self.sync.renew, name, owner, ttl)
        )

    async def inspect(self, name: str) -> LockInfo | None:
        return await self._pools.run(self._pools.ops, functools.partial(self.sync.inspect, name))

    async def list(self, prefix: str) -> list[LockInfo]:
        return await self._pools.run(self._pools.ops, functools.partial(self.sync.list, prefix))

    async def close(self) -> None:
        await self._pools.run(self._pools.ops, self.sync.close)
        self._pools.shutdown()
