"""``redis://`` and ``rediss://``: one Redis server (or a primary with replicas).

Acquire is one round trip: ``acquire.lua`` takes the key and issues the token
from the name's counter in the same script, or queues the caller. Release is
compare-and-delete that wakes the oldest waiter only (``free.lua``), through its
client's own pub/sub channel; waiters otherwise wake at the holder's TTL. The
scripts travel pre-packed on connections of their own (:mod:`.wire`).
"""

from __future__ import annotations

import threading
from typing import Any

import redis

from fencelock import clock, forking
from fencelock.backends.base import AttemptResult, Busy, LockInfo
from fencelock.backends.redis.errors import (
    DRIVER_ERRORS,
    not_replicated,
    translate,
    translated,
    unanswered,
)
from fencelock.backends.redis.listener import WakeListener
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
from fencelock.backends.redis.wire import Wire
from fencelock.engine.urls import ParsedURL
from fencelock.errors import BackendUnavailable


class RedisAttempt:
    def __init__(
        self, backend: RedisBackend, name: str, owner: str, ttl: float, fair: bool
    ) -> None:
        self._backend, self._owner, self._ttl = backend, owner, ttl
        self._keys = LockKeys.of(name)
        self._command = acquire_command(self._keys, owner, ttl, backend.listener.channel, fair)
        self._event: threading.Event | None = None
        self._queued = False
        self._unanswered = False

    def try_acquire(self) -> AttemptResult:
        result = self._take()
        if isinstance(result, Busy) and self._event is None:
            self._event = self._backend.listener.wakeups.expect(self._owner)
            if self._backend.listener.ensure_listening():
                # We were queued before the subscription: look again, a wake-up may be gone.
                result = self._take()
        return result

    def _take(self) -> AttemptResult:
        try:
            result = self._backend.take(self._command, self._keys, self._owner)
        except BackendUnavailable as exc:
            # Timed out: the server may still run the script and give us a lease or a
            # place in the queue that nobody will use; close() has them undone.
            self._unanswered = self._unanswered or unanswered(exc)
            raise
        self._queued = isinstance(result, Busy)
        return result

    def wait(self, timeout: float) -> None:
        if self._event is not None:
            self._event.wait(timeout)
            self._event.clear()

    def close(self) -> None:
        if self._event is not None:
            self._backend.listener.wakeups.forget(self._owner)
            self._event = None
        if self._unanswered:
            self._unanswered = self._queued = False
            self._backend.undo_later(self._keys, self._owner, self._ttl)
        if self._queued:
            self._queued = False
            self._backend.leave_queue(self._keys, self._owner)


class RedisBackend:
    """Leases on one Redis server."""

    supports_fair = True

    def __init__(self, parsed: ParsedURL) -> None:
        self.url = parsed.redacted
        self.options = redis_options(parsed)
        self.where = self.options.where
        self._wait_after = wait_after(self.options)
        self._connect()
        with translated(self.where, self.options.tls):
            self.redis.ping()
        forking.register(self)

    def _connect(self) -> None:
        """This process's client, script connections and wake-up listener (none opened yet)."""
        self.redis: Any = redis.Redis(**self.options.client_kwargs())
        self.wire = Wire(self.redis)
        self.listener = WakeListener(self.redis, self.where, self.options.timeout)
        self._closed = threading.Event()  # stops this process's undo threads

    def _reset_after_fork(self) -> None:
        """In a forked child: the parent's sockets, channel and threads stay the parent's."""
        forking.abandon(self.redis, self.wire, self.listener)
        self._connect()

    def attempt(self, name: str, owner: str, ttl: float, fair: bool = False) -> RedisAttempt:
        return RedisAttempt(self, name, owner, ttl, fair)

    def take(self, command: Command, keys: LockKeys, owner: str) -> AttemptResult:
        try:
            if not self.options.wait_replicas:
                return attempt_result(self.wire.run(*command))
            reply, acked = self.wire.run_then(*command, self._wait_after)
            result = attempt_result(reply)
            if acked is not None and acked < self.options.wait_replicas:
                self.wire.run(*release_command(keys, owner))
                raise not_replicated(self.options, acked)
        except DRIVER_ERRORS as exc:
            raise translate(exc, self.where, self.options.tls) from exc
        return result

    def leave_queue(self, keys: LockKeys, owner: str) -> None:
        try:
            self.wire.run(*leave_command(keys, owner, self.listener.channel))
        except DRIVER_ERRORS as exc:
            raise translate(exc, self.where, self.options.tls) from exc

    def release(self, name: str, owner: str) -> bool:
        try:
            return bool(self.wire.run(*release_command(LockKeys.of(name), owner)) == 1)
        except DRIVER_ERRORS as exc:
            raise translate(exc, self.where, self.options.tls) from exc

    def renew(self, name: str, owner: str, ttl: float) -> bool:
        try:
            return bool(self.wire.run(*renew_command(LockKeys.of(name), owner, ttl)) == 1)
        except DRIVER_ERRORS as exc:
            raise translate(exc, self.where, self.options.tls) from exc

    def inspect(self, name: str) -> LockInfo | None:
        keys = LockKeys.of(name)
        with translated(self.where, self.options.tls):
            owner, pttl, token, waiters = (
                self.redis.pipeline(transaction=False)
                .get(keys.lock)
                .pttl(keys.lock)
                .get(keys.token)
                .zcard(keys.queue)
                .execute()
            )
        return lock_info(name, owner, pttl, token, waiters)

    def list(self, prefix: str) -> list[LockInfo]:
        infos = []
        with translated(self.where, self.options.tls):
            for key in sorted(self.redis.scan_iter(match=scan_pattern(prefix), count=500)):
                info = self.inspect(name_of(key))
                if info is not None and info.held:
                    infos.append(info)
        return infos

    def undo_later(self, keys: LockKeys, owner: str, ttl: float) -> None:
        """Off the caller's thread, best effort: once the server answers again, release
        what an unanswered acquire may have taken (a lease, a queue entry)."""
        threading.Thread(
            target=self._undo,
            args=(keys, owner, clock.now() + ttl),
            daemon=True,
            name="fencelock-redis-undo",
        ).start()

    def _undo(self, keys: LockKeys, owner: str, until: float) -> None:
        while clock.now() < until and not self._closed.is_set():
            try:
                self.redis.ping()
                if self._closed.wait(UNDO_SETTLE):
                    return
                self.wire.run(*release_command(keys, owner))
                self.wire.run(*leave_command(keys, owner, self.listener.channel))
                return
            except DRIVER_ERRORS:
                self._closed.wait(UNDO_RETRY)

    def close(self) -> None:
        self._closed.set()
        self.listener.close()
        self.wire.close()
        self.redis.close()
