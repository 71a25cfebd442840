"""``redis://`` and ``rediss://``: one Redis server (or a primary with replicas).

Acquire is one round trip: ``acquire.lua`` sets the key with NX PX and issues
the token from the name's counter in the same script. Release is compare-and-
delete that publishes on the lock's channel; waiters watch that channel through
one pub/sub connection per client and otherwise wake at the holder's TTL.
"""

from __future__ import annotations

import threading
from typing import Any

import redis

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
from fencelock.backends.redis_listener import ReleaseListener
from fencelock.engine.urls import ParsedURL


class RedisAttempt:
    def __init__(
        self, backend: RedisBackend, name: str, owner: str, ttl: float, fair: bool
    ) -> None:
        self._backend, self._owner, self._ttl, self._fair = backend, owner, ttl, fair
        self._keys = LockKeys.of(name)
        self._event: threading.Event | None = None
        self._queued = False

    def try_acquire(self) -> AttemptResult:
        result = self._backend.take(self._keys, self._owner, self._ttl, self._fair)
        if isinstance(result, Busy) and self._event is None:
            # Watch first, then look again: a release in between is not missed.
            self._event = self._backend.listener.watch(self._keys.channel)
            result = self._backend.take(self._keys, self._owner, self._ttl, self._fair)
        self._queued = self._fair and isinstance(result, Busy)
        return result

    def wait(self, timeout: float) -> None:
        if self._event is not None:
            self._event.wait(timeout)
            self._event.clear()

    def close(self) -> None:
        if self._event is not None:
            self._backend.listener.unwatch(self._keys.channel, self._event)
            self._event = None
        if self._queued:
            self._queued = False
            self._backend.leave_queue(self._keys, self._owner)


class RedisBackend:
    """Leases on one Redis server."""

    supports_fair = True

    def __init__(self, parsed: ParsedURL) -> None:
        self.url = parsed.redacted
        self.options = redis_options(parsed)
        self.redis: Any = redis.Redis(**self.options.client_kwargs())
        with translated(self.options.where):
            self.redis.ping()
        self.scripts = Scripts(self.redis)
        self.listener = ReleaseListener(self.redis)

    def attempt(self, name: str, owner: str, ttl: float, fair: bool = False) -> RedisAttempt:
        return RedisAttempt(self, name, owner, ttl, fair)

    def take(self, keys: LockKeys, owner: str, ttl: float, fair: bool = False) -> AttemptResult:
        with translated(self.options.where):
            reply = self.scripts.acquire(keys, owner, ttl, fair)
            result = attempt_result(reply, fair)
            if self.options.wait_replicas and not isinstance(result, Busy):
                acked = self.redis.wait(self.options.wait_replicas, self.options.wait_timeout_ms)
                if acked < self.options.wait_replicas:
                    self.scripts.release(keys, owner)
                    raise not_replicated(self.options, acked)
        return result

    def leave_queue(self, keys: LockKeys, owner: str) -> None:
        with translated(self.options.where):
            self.scripts.leave_queue(keys, owner)

    def release(self, name: str, owner: str) -> bool:
        keys = LockKeys.of(name)
        with translated(self.options.where):
            return bool(self.scripts.release(keys, owner))

    def renew(self, name: str, owner: str, ttl: float) -> bool:
        with translated(self.options.where):
            return bool(self.scripts.renew(LockKeys.of(name), owner, ttl))

    def inspect(self, name: str) -> LockInfo | None:
        keys = LockKeys.of(name)
        with translated(self.options.where):
            owner, pttl, token = (
                self.redis.pipeline(transaction=False)
                .get(keys.lock)
                .pttl(keys.lock)
                .get(keys.token)
                .execute()
            )
        return lock_info(name, owner, pttl, token)

    def list(self, prefix: str) -> list[LockInfo]:
        infos = []
        with translated(self.options.where):
            for key in sorted(self.redis.scan_iter(match=scan_pattern(prefix), count=500)):
                info = self.inspect(name_of(key))
                if info is not None and info.held:
                    infos.append(info)
        return infos

    def close(self) -> None:
        self.listener.close()
        self.redis.close()
