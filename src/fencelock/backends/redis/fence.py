"""The Redis side of :class:`fencelock.fencing.RedisGuard`: one Lua script that checks a
token against a key's fence and applies the guarded write in the same step."""

from __future__ import annotations

from typing import Any

import redis

from fencelock.backends.redis.errors import translated
from fencelock.backends.redis.options import redis_options
from fencelock.backends.redis.scripts import lua
from fencelock.engine.urls import ParsedURL


class RedisFence:
    """Fences kept in one Redis server, a key each."""

    def __init__(self, parsed: ParsedURL) -> None:
        self._options = redis_options(parsed)
        # The driver boundary: redis-py's replies are untyped (its commands return a
        # union with Awaitable), so its client is Any here, as in the Redis backends.
        self._redis: Any = redis.Redis(**self._options.client_kwargs())
        self._script = self._redis.register_script(lua("fence"))

    def check(
        self, fence_key: str, token: int, allow_equal: bool, extra_keys: list[str], value: str
    ) -> tuple[bool, int]:
        """Whether ``token`` passed (the write to ``extra_keys`` applied), and the last token."""
        with translated(self._options.where, self._options.tls):
            accepted, last = self._script(
                keys=[fence_key, *extra_keys],
                args=[str(token), "1" if allow_equal else "0", value],
            )
        return int(accepted) == 1, int(last)

    def last(self, fence_key: str) -> int | None:
        with translated(self._options.where, self._options.tls):
            value = self._redis.get(fence_key)
        return None if value is None else int(value)

    def close(self) -> None:
        self._redis.close()
