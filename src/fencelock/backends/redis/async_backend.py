"""The asyncio face of ``redis://``: the same scripts and wake-ups, on ``redis.asyncio``."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import redis.asyncio
from redis.exceptions import ResponseError

from fencelock import clock, forking
from fencelock.backends.base import AttemptResult, Busy, LockInfo
from fencelock.backends.redis.errors import (
    DRIVER_ERRORS,
    not_replicated,
    subscribing,
    subscription_refused,
    translate,
    translated,
    unanswered,
)
from fencelock.backends.redis.listener import Wakeups, new_channel, on_message, stop_listening
from fencelock.backends.redis.options import redis_options
from fencelock.backends.redis.scripts import (
    UNDO_RETRY,
    UNDO_SETTLE,
    Command,
    LockKeys,
    acquire_command,
    attempt_result,
    leave_command,
    lock_info,
    name_of,
    release_command,
    renew_command,
    scan_pattern,
    wait_after,
)
from fencelock.backends.redis.wire import AsyncWire, within
from fencelock.engine.urls import ParsedURL
from fencelock.errors import BackendUnavailable, FencelockError

CONFIRM_TIMEOUT = 2.0


class AsyncWakeListener:
    """:class:`~fencelock.backends.redis.listener.WakeListener` for an asyncio client."""

    def __init__(self, client: Any, where: str, timeout: float = CONFIRM_TIMEOUT) -> None:
        self.channel = new_channel()
        self._client, self._where, self._timeout = client, where, timeout
        self._pubsub: Any = None
        self._task: asyncio.Task[None] | None = None
        self._subscribed = asyncio.Event()
        self._changed = asyncio.Event()
        self._error: BaseException | None = None
        self.wakeups = Wakeups(asyncio.Event, contextlib.nullcontext())

    async def ensure_listening(self) -> bool:
        """As WakeListener.ensure_listening: raises BackendUnavailable if refused or silent."""
        if self._subscribed.is_set():
            return False
        self._error = None  # wait for this subscription's outcome, not an older one
        if self._pubsub is None:
            pubsub = self._client.pubsub()
            self._pubsub = pubsub
            try:
                with subscribing(self._where):
                    await within(self._timeout, pubsub.subscribe(self.channel))
            except BaseException:
                self._pubsub = None
                with contextlib.suppress(Exception):
                    await pubsub.aclose()
                raise
            self._task = asyncio.get_running_loop().create_task(self._listen(pubsub))
        deadline = asyncio.get_running_loop().time() + self._timeout
        while not self._subscribed.is_set():
            if self._error is not None:
                raise subscription_refused(self._error, self._where) from self._error
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                raise BackendUnavailable(
                    f"{self._where} did not confirm the wake-up subscription "
                    f"within {self._timeout:g}s"
                )
            self._changed.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await within(left, self._changed.wait())
        return True

    async def _listen(self, pubsub: Any) -> None:
        while True:
            try:
                message = await pubsub.get_message(timeout=1.0)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                refused = isinstance(exc, ResponseError)  # ACL: asking again will not help
                if refused:  # the next waiter subscribes afresh (and gets the error)
                    self._pubsub = self._task = None
                    with contextlib.suppress(Exception):
                        await pubsub.aclose()
                self._subscribed.clear()
                self._error = exc
                self._changed.set()
                self.wakeups.wake_all()
                if refused:
                    return
                await asyncio.sleep(0.1)
                continue
            if message is not None:
                on_message(message, self._subscribed, self.wakeups)
                self._changed.set()

    async def close(self) -> None:
        await stop_listening(self._task, self._pubsub)


class AsyncRedisAttempt:
    def __init__(
        self, backend: AsyncRedisBackend, name: str, owner: str, ttl: float, fair: bool
    ) -> None:
        self._backend, self._owner, self._name, self._ttl = backend, owner, name, ttl
        self._keys = LockKeys.of(name)
        self._command = acquire_command(self._keys, owner, ttl, backend.listener.channel, fair)
        self._event: asyncio.Event | None = None
        self._queued = False
        self._abandoned = False
        self._unanswered = False

    async def try_acquire(self) -> AttemptResult:
        result = await self._take()
        if isinstance(result, Busy) and self._event is None:
            self._event = self._backend.listener.wakeups.expect(self._owner)
            if await self._backend.listener.ensure_listening():
                result = await self._take()
        return result

    async def _take(self) -> AttemptResult:
        try:
            result = await self._backend.take(self._command, self._keys, self._owner)
        except asyncio.CancelledError:
            # The script may have run (and given us the lease, or queued us) without
            # our reading its reply: close() undoes both, or the lease stays for its TTL.
            self._abandoned = True
            raise
        except BackendUnavailable as exc:
            # Timed out: as a cancellation, but the server is slow, so undo it later.
            self._unanswered = self._unanswered or unanswered(exc)
            raise
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
        if self._unanswered and not self._abandoned:
            self._unanswered = self._queued = False
            self._backend.undo_later(self._keys, self._owner, self._ttl)
        if self._abandoned:
            self._abandoned = self._queued = False
            with contextlib.suppress(FencelockError):  # best effort: keep the cancellation
                await self._backend.release(self._name, self._owner)
                await self._backend.leave_queue(self._keys, self._owner)
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
        self._wait_after = wait_after(self.options)
        self._connect()
        forking.register(self)

    def _connect(self) -> None:
        """This process's client, script connections and wake-up listener (none opened yet)."""
        self.redis: Any = redis.asyncio.Redis(**self.options.client_kwargs(asyncio=True))
        self.wire = AsyncWire(self.redis)
        self.listener = AsyncWakeListener(self.redis, self.where, self.options.timeout)
        self._undoing: set[asyncio.Task[None]] = set()

    async def open(self) -> None:
        with translated(self.where, self.options.tls):
            await self.redis.ping()

    def _reset_after_fork(self) -> None:
        """In a forked child: the parent's connections and tasks (on its loop) stay its own.

        Finalized here, they would unregister their sockets from the parent's epoll set.
        """
        forking.abandon(self.redis, self.wire, self.listener, self._undoing)
        self._connect()

    def attempt(self, name: str, owner: str, ttl: float, fair: bool = False) -> AsyncRedisAttempt:
        return AsyncRedisAttempt(self, name, owner, ttl, fair)

    async def take(self, command: Command, keys: LockKeys, owner: str) -> AttemptResult:
        try:
            if not self.options.wait_replicas:
                return attempt_result(await self.wire.run(*command))
            reply, acked = await self.wire.run_then(*command, self._wait_after)
            result = attempt_result(reply)
            if acked is not None and acked < self.options.wait_replicas:
                await self.wire.run(*release_command(keys, owner))
                raise not_replicated(self.options, acked)
        except DRIVER_ERRORS as exc:
            raise translate(exc, self.where, self.options.tls) from exc
        return result

    async def leave_queue(self, keys: LockKeys, owner: str) -> None:
        try:
            await self.wire.run(*leave_command(keys, owner, self.listener.channel))
        except DRIVER_ERRORS as exc:
            raise translate(exc, self.where, self.options.tls) from exc

    async def release(self, name: str, owner: str) -> bool:
        try:
            return bool(await self.wire.run(*release_command(LockKeys.of(name), owner)) == 1)
        except DRIVER_ERRORS as exc:
            raise translate(exc, self.where, self.options.tls) from exc

    async def renew(self, name: str, owner: str, ttl: float) -> bool:
        try:
            return bool(await self.wire.run(*renew_command(LockKeys.of(name), owner, ttl)) == 1)
        except DRIVER_ERRORS as exc:
            raise translate(exc, self.where, self.options.tls) from exc

    async def inspect(self, name: str) -> LockInfo | None:
        keys = LockKeys.of(name)
        with translated(self.where, self.options.tls):
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
        with translated(self.where, self.options.tls):
            keys = sorted([k async for k in self.redis.scan_iter(match=scan_pattern(prefix))])
        for key in keys:
            info = await self.inspect(name_of(key))
            if info is not None and info.held:
                infos.append(info)
        return infos

    def undo_later(self, keys: LockKeys, owner: str, ttl: float) -> None:
        """In the background, best effort: once the server answers again, release what
        an unanswered acquire may have taken (a lease, a queue entry)."""
        task = asyncio.get_running_loop().create_task(self._undo(keys, owner, clock.now() + ttl))
        self._undoing.add(task)
        task.add_done_callback(self._undoing.discard)

    async def _undo(self, keys: LockKeys, owner: str, until: float) -> None:
        while clock.now() < until:
            try:
                await within(self.options.timeout, self.redis.ping())
                await asyncio.sleep(UNDO_SETTLE)
                await self.wire.run(*release_command(keys, owner))
                await self.wire.run(*leave_command(keys, owner, self.listener.channel))
                return
            except (*DRIVER_ERRORS, asyncio.TimeoutError):
                await asyncio.sleep(UNDO_RETRY)

    async def close(self) -> None:
        for task in list(self._undoing):
            task.cancel()
        await asyncio.gather(*self._undoing, return_exceptions=True)
        await self.listener.close()
        await self.wire.close()
        await self.redis.aclose()
