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
    FAIR_LIVENESS,
    LockKeys,
    RedisOptions,
    attempt_result,
    lock_info,
    lua,
    name_of,
    redis_options,
    scan_pattern,
    translated,
)
from fencelock.backends.redis_listener import ReleaseListener
from fencelock.engine.urls import ParsedURL
from fencelock.errors import BackendUnavailable


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
        self._acquire = self.redis.register_script(lua("acquire"))
        self._release = self.redis.register_script(lua("release"))
        self._renew = self.redis.register_script(lua("renew"))
        self._fair_acquire = self.redis.register_script(lua("fair_acquire"))
        self._fair_leave = self.redis.register_script(lua("fair_leave"))
        self.listener = ReleaseListener(self.redis)

    def attempt(self, name: str, owner: str, ttl: float, fair: bool = False) -> RedisAttempt:
        return RedisAttempt(self, name, owner, ttl, fair)

    def take(self, keys: LockKeys, owner: str, ttl: float, fair: bool = False) -> AttemptResult:
        with translated(self.options.where):
            if fair:
                liveness = _ms(FAIR_LIVENESS)
                reply = self._fair_acquire(keys=keys.fair, args=[owner, _ms(ttl), liveness])
            else:
                reply = self._acquire(keys=[keys.lock, keys.token], args=[owner, _ms(ttl)])
            result = attempt_result(reply, fair)
            if self.options.wait_replicas and not isinstance(result, Busy):
                acked = self.redis.wait(self.options.wait_replicas, self.options.wait_timeout_ms)
                if acked < self.options.wait_replicas:
                    self._release(keys=[keys.lock], args=[owner, keys.channel])
                    raise _not_replicated(self.options, acked)
        return result

    def leave_queue(self, keys: LockKeys, owner: str) -> None:
        with translated(self.options.where):
            self._fair_leave(keys=[keys.lock, *keys.fair[2:4]], args=[owner, keys.channel])

    def release(self, name: str, owner: str) -> bool:
        keys = LockKeys.of(name)
        with translated(self.options.where):
            return bool(self._release(keys=[keys.lock], args=[owner, keys.channel]))

    def renew(self, name: str, owner: str, ttl: float) -> bool:
        with translated(self.options.where):
            return bool(self._renew(keys=[LockKeys.of(name).lock], args=[owner, _ms(ttl)]))

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


def _ms(ttl: float) -> int:
    return max(int(ttl * 1000), 1)


def _not_replicated(options: RedisOptions, acked: int) -> BackendUnavailable:
    return BackendUnavailable(
        f"{options.where}: only {acked} of {options.wait_replicas} replicas acknowledged the "
        f"lock within {options.wait_timeout_ms} ms; not taking it (wait_replicas)"
    )
