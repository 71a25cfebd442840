"""The asyncio face of ``redis://``: the same scripts and wake-ups, on ``redis.asyncio``."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import redis.asyncio

from fencelock.backends.base import AttemptResult, Busy, LockInfo
from fencelock.backends.redis_common import (
    DRIVER_ERRORS,
    Command,
    LockKeys,
    acquire_command,
    attempt_result,
    leave_command,
    lock_info,
    name_of,
    not_replicated,
    redis_options,
    release_command,
    renew_command,
    scan_pattern,
    translate,
    translated,
)
from fencelock.backends.redis_listener import Wakeups, new_channel, on_message, stop_listening
from fencelock.backends.redis_wire import AsyncWire, pack
from fencelock.engine.urls import ParsedURL

CONFIRM_TIMEOUT = 2.0


class AsyncWakeListener:
    """:class:`~fencelock.backends.redis_listener.WakeListener` for an asyncio client."""

    def __init__(self, client: Any) -> None:
        self.channel = new_channel()
        self._client = client
        self._pubsub: Any = None
        self._task: asyncio.Task[None] | None = None
        self._subscribed = asyncio.Event()
        self.wakeups = Wakeups(asyncio.Event, contextlib.nullcontext())

    async def ensure_listening(self) -> bool:
        if self._subscribed.is_set():
            return False
        if self._pubsub is None:
            self._pubsub = self._client.pubsub()
            await self._pubsub.subscribe(self.channel)
            self._task = asyncio.get_running_loop().create_task(self._listen())
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._subscribed.wait(), CONFIRM_TIMEOUT)
        return True

    async def _listen(self) -> None:
        while True:
            try:
                message = await self._pubsub.get_message(timeout=1.0)
            except asyncio.CancelledError:
                raise
            except Exception:
                self._subscribed.clear()
                self.wakeups.wake_all()
                await asyncio.sleep(0.1)
                continue
            if message is not None:
                on_message(message, self._subscribed, self.wakeups)

    async def close(self) -> None:
        await stop_listening(self._task, self._pubsub)


class AsyncRedisAttempt:
    def __init__(
        self, backend: AsyncRedisBackend, name: str, owner: str, ttl: float, fair: bool
    ) -> None:
        self._backend, self._owner = backend, owner
        self._keys = LockKeys.of(name)
        self._command = acquire_command(self._keys, owner, ttl, backend.listener.channel, fair)
        self._event: asyncio.Event | None = None
        self._queued = False

    async def try_acquire(self) -> AttemptResult:
        result = await self._backend.take(self._command, self._keys, self._owner)
        if isinstance(result, Busy) and self._event is None:
            self._event = self._backend.listener.wakeups.expect(self._owner)
            if await self._backend.listener.ensure_listening():
                result = await self._backend.take(self._command, self._keys, self._owner)
        self._queued = isinstance(result, Busy)
        return result

    async def wait(self, timeout: float) -> None:
        if self._event is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._event.wait(), timeout)
            self._event.clear()

    async def close(self) -> None:
        if self._event is not None:
            self._backend.listener.wakeups.forget(self._owner)
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
        self.where = self.options.where
        self.redis: Any = redis.asyncio.Redis(**self.options.client_kwargs(asyncio=True))
        self.wire = AsyncWire(self.redis)
        self.listener = AsyncWakeListener(self.redis)

    def attempt(self, name: str, owner: str, ttl: float, fair: bool = False) -> AsyncRedisAttempt:
        return AsyncRedisAttempt(self, name, owner, ttl, fair)

    async def take(self, command: Command, keys: LockKeys, owner: str) -> AttemptResult:
        try:
            if not self.options.wait_replicas:
                return attempt_result(await self.wire.run(*command))
            reply, acked = await self.wire.run_then(*command, self._wait_command)
            result = attempt_result(reply)
            if acked is not None and acked < self.options.wait_replicas:
                await self.wire.run(*release_command(keys, owner))
                raise not_replicated(self.options, acked)
        except DRIVER_ERRORS as exc:
            raise translate(exc, self.where) from exc
        return result

    def _wait_command(self, reply: Any) -> bytes | None:
        """``WAIT`` for the replicas after a successful acquire (``wait_replicas``)."""
        if reply[0] != 1:
            return None
        return pack([b"WAIT", self.options.wait_replicas, self.options.wait_timeout_ms])

    async def leave_queue(self, keys: LockKeys, owner: str) -> None:
        try:
            await self.wire.run(*leave_command(keys, owner, self.listener.channel))
        except DRIVER_ERRORS as exc:
            raise translate(exc, self.where) from exc

    async def release(self, name: str, owner: str) -> bool:
        try:
            return bool(await self.wire.run(*release_command(LockKeys.of(name), owner)) == 1)
        except DRIVER_ERRORS as exc:
            raise translate(exc, self.where) from exc

    async def renew(self, name: str, owner: str, ttl: float) -> bool:
        try:
            return bool(await self.wire.run(*renew_command(LockKeys.of(name), owner, ttl)) == 1)
        except DRIVER_ERRORS as exc:
            raise translate(exc, self.where) from exc

    async def inspect(self, name: str) -> LockInfo | None:
        keys = LockKeys.of(name)
        with translated(self.where):
            owner, pttl, token, waiters = (
                await self.redis.pipeline(transaction=False)
                .get(keys.lock)
                .pttl(keys.lock)
                .get(keys.token)
                .zcard(keys.queue)
                .execute()
            )
        return lock_info(name, owner, pttl, token, waiters)

    async def list(self, prefix: str) -> list[LockInfo]:
        infos = []
        with translated(self.where):
            keys = sorted([k async for k in self.redis.scan_iter(match=scan_pattern(prefix))])
        for key in keys:
            info = await self.inspect(name_of(key))
            if info is not None and info.held:
                infos.append(info)
        return infos

    async def close(self) -> None:
        await self.listener.close()
        await self.wire.close()
        await self.redis.aclose()
