"""A blocking face for an asyncio-native backend: its coroutines run on one loop thread.

Used where concurrency is the algorithm (Redlock talks to every node at once):
the asyncio implementation is the only one, and the sync client calls into it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from fencelock.backends.base import AsyncAttempt, AsyncBackend, AttemptResult, LockInfo

T = TypeVar("T")


class LoopThread:
    """An event loop running on a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, daemon=True, name="fencelock-loop"
        )
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        self.loop.close()


class LoopThreadAttempt:
    def __init__(self, attempt: AsyncAttempt, loop: LoopThread) -> None:
        self._attempt, self._loop = attempt, loop

    def try_acquire(self) -> AttemptResult:
        return self._loop.run(self._attempt.try_acquire())

    def wait(self, timeout: float) -> None:
        self._loop.run(self._attempt.wait(timeout))

    def close(self) -> None:
        self._loop.run(self._attempt.close())


class LoopThreadBackend:
    """Runs an :class:`AsyncBackend` (created on the loop thread) behind the sync protocol."""

    def __init__(self, make: Any) -> None:
        self._loop = LoopThread()
        try:
            self.inner: AsyncBackend = self._loop.run(_construct(make))
        except BaseException:
            self._loop.stop()
            raise
        self.url = self.inner.url
        self.supports_fair = self.inner.supports_fair

    def attempt(self, name: str, owner: str, ttl: float, fair: bool = False) -> LoopThreadAttempt:
        return LoopThreadAttempt(self.inner.attempt(name, owner, ttl, fair), self._loop)

    def release(self, name: str, owner: str) -> bool:
        return self._loop.run(self.inner.release(name, owner))

    def renew(self, name: str, owner: str, ttl: float) -> bool:
        return self._loop.run(self.inner.renew(name, owner, ttl))

    def inspect(self, name: str) -> LockInfo | None:
        return self._loop.run(self.inner.inspect(name))

    def list(self, prefix: str) -> list[LockInfo]:
        return self._loop.run(self.inner.list(prefix))

    def close(self) -> None:
        try:
            self._loop.run(self.inner.close())
        finally:
            self._loop.stop()


async def _construct(make: Any) -> AsyncBackend:
    backend: AsyncBackend = make()
    return backend
