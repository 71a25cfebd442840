"""The asyncio face of ``redis://``: the same scripts through ``redis.asyncio``."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import redis.asyncio

from fencelock.backends.base import AttemptResult, Busy, LockInfo
from fencelock.backends.redis_common import (
    LockKeys,
    Scripts,
    attempt_result,
    lock_info,
    name_of,
    not_replicated,
    redis_options,
    scan_pattern,
    translated,
)
from fencelock.engine.urls import ParsedURL

CONFIRM_TIMEOUT = 2.0


class AsyncReleaseListener:
    """One pub/sub connection per asyncio client; a task fans releases out to waiters."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._pubsub: Any = None
        self._confirmed: dict[str, asyncio.Event] = {}
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self._task: asyncio.Task[None] | None = None

    async def watch(self, channel: str, event: asyncio.Event | None = None) -> asyncio.Event:
        """Subscribe (once) and return an event set on the next release of ``channel``."""
        event = event or asyncio.Event()
        if self._pubsub is None:
            self._pubsub = self._client.pubsub()
        if channel not in self._confirmed:
            self._confirmed[channel] = asyncio.Event()
            await self._pubsub.subscribe(channel)
        self._waiters.setdefault(channel, set()).add(event)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._listen())
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._confirmed[channel].wait(), CONFIRM_TIMEOUT)
        return event

    def unwatch(self, channel: str, event: asyncio.Event) -> None:
        self._waiters.get(channel, set()).discard(event)

    async def _listen(self) -> None:
        while True:
            try:
                message = await self._pubsub.get_message(timeout=1.0)
            except asyncio.CancelledError:
                raise
            except Exception:
                self._wake_all()
                await asyncio.sleep(0.1)
                continue
            if message is None:
                continue
            channel = message["channel"]
            if message["type"] == "subscribe" and channel in self._confirmed:
                self._confirmed[channel].set()
            elif message["type"] == "message":
                for event in self._waiters.get(channel, ()):
                    event.set()

    def _wake_all(self) -> None:
        for waiters in self._waiters.values():
            for event in waiters:
                event.set()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._pubsub is not None:
            with contextlib.suppress(Exception):
                await self._pubsub.aclose()


class AsyncRedisAttempt:
    def __init__(
        self, backend: AsyncRedisBackend, name: str, owner: str, ttl: float, fair: bool
    ) -> None:
        self._backend, self._owner, self._ttl, self._fair = backend, owner, ttl, fair
        self._keys = LockKeys.of(name)
        self._event: asyncio.Event | None = None
        self._queued = False

    async def try_acquire(self) -> AttemptResult:
        result = await self._backend.take(self._keys, self._owner, self._ttl, self._fair)
        if isinstance(result, Busy) and self._event is None:
            self._event = await self._backend.listener.watch(self._keys.channel)
            result = await self._backend.take(self._keys, self._owner, self._ttl, self._fair)
        self._queued = self._fair and isinstance(result, Busy)
        return result

    async def wait(self, timeout: float) -> None:
        if self._event is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._event.wait(), timeout)
            self._event.clear()

    async def close(self) -> None:
        if self._event is not None:
            self._backend.listener.unwatch(self._keys.channel, self._event)
            self._event = None
        if self._queued:
            self._queued = False
            await self._backend.leave_queue(self._keys, self._owner)


class AsyncRedisBackend:
    """Leases on one Redis server, for asyncio."""

    supports_fair = True

    def __init__(self, parsed: ParsedURL) -> None:
        self.url = parsed.redacted
        self.options = redis_options(parsed)
        self.redis: Any = redis.asyncio.Redis(**self.options.client_kwargs(asyncio=True))
        self.scripts = Scripts(self.redis)
        self.listener = AsyncReleaseListener(self.redis)

    def attempt(self, name: str, owner: str, ttl: float, fair: bool = False) -> AsyncRedisAttempt:
        return AsyncRedisAttempt(self, name, owner, ttl, fair)

    async def take(
        self, keys: LockKeys, owner: str, ttl: float, fair: bool = False
    ) -> AttemptResult:
        with translated(self.options.where):
            reply = await self.scripts.acquire(keys, owner, ttl, fair)
            result = attempt_result(reply, fair)
            if self.options.wait_replicas and not isinstance(result, Busy):
                acked = await self.redis.wait(
                    self.options.wait_replicas, self.options.wait_timeout_ms
                )
                if acked < self.options.wait_replicas:
                    await self.scripts.release(keys, owner)
                    raise not_replicated(self.options, acked)
        return result

    async def leave_queue(self, keys: LockKeys, owner: str) -> None:
        with translated(self.options.where):
            await self.scripts.leave_queue(keys, owner)

    async def release(self, name: str, owner: str) -> bool:
        keys = LockKeys.of(name)
        with translated(self.options.where):
            return bool(await self.scripts.release(keys, owner))

    async def renew(self, name: str, owner: str, ttl: float) -> bool:
        with translated(self.options.where):
            return bool(await self.scripts.renew(LockKeys.of(name), owner, ttl))

    async def inspect(self, name: str) -> LockInfo | None:
        keys = LockKeys.of(name)
        with translated(self.options.where):
            owner, pttl, token = (
                await self.redis.pipeline(transaction=False)
                .get(keys.lock)
                .pttl(keys.lock)
                .get(keys.token)
                .execute()
            )
        return lock_info(name, owner, pttl, token)

    async def list(self, prefix: str) -> list[LockInfo]:
        infos = []
        with translated(self.options.where):
            keys = sorted([k async for k in self.redis.scan_iter(match=scan_pattern(prefix))])
        for key in keys:
            info = await self.inspect(name_of(key))
            if info is not None and info.held:
                infos.append(info)
        return infos

    async def close(self) -> None:
        await self.listener.close()
        await self.redis.aclose()
