"""Backends by URL scheme. Each backend module is imported only when its scheme is used."""

from __future__ import annotations

import importlib

from fencelock.backends.base import AsyncBackend, Backend
from fencelock.engine.urls import ParsedURL, parse_url
from fencelock.errors import ConfigError

# scheme -> (module, class) of the blocking implementation
_SYNC = {
    "memory": ("fencelock.backends.memory", "MemoryBackend"),
    "sqlite": ("fencelock.backends.sqlite.backend", "SQLiteBackend"),
    "redis": ("fencelock.backends.redis.sync_backend", "RedisBackend"),
    "rediss": ("fencelock.backends.redis.sync_backend", "RedisBackend"),
    "redlock": ("fencelock.backends.redlock.backend", "RedlockBackend"),
    "redlocks": ("fencelock.backends.redlock.backend", "RedlockBackend"),
}
# scheme -> (module, class) of a native asyncio implementation, where one exists
_ASYNC = {
    "redis": ("fencelock.backends.redis.async_backend", "AsyncRedisBackend"),
    "rediss": ("fencelock.backends.redis.async_backend", "AsyncRedisBackend"),
    "redlock": ("fencelock.backends.redlock.backend", "AsyncRedlockBackend"),
    "redlocks": ("fencelock.backends.redlock.backend", "AsyncRedlockBackend"),
}
# scheme -> the extra that installs its driver
_EXTRAS = {"redis": "redis", "rediss": "redis", "redlock": "redis", "redlocks": "redis"}

SCHEMES = tuple(sorted(_SYNC))


def _resolve(parsed: ParsedURL, table: dict[str, tuple[str, str]]) -> type:
    module_name, class_name = table[parsed.scheme]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        extra = _EXTRAS.get(parsed.scheme, parsed.scheme)
        raise ConfigError(
            f"{parsed.scheme}:// needs the {exc.name!r} package: pip install 'fencelock[{extra}]'"
        ) from exc
    return getattr(module, class_name)  # type: ignore[no-any-return]


def _check_scheme(parsed: ParsedURL) -> None:
    if parsed.scheme not in _SYNC:
        raise ConfigError(
            f"unknown scheme {parsed.scheme!r} in {parsed.redacted!r} "
            f"(supported: {', '.join(s + '://' for s in SCHEMES)})"
        )


def open_backend(url: str) -> Backend:
    """The blocking backend for ``url``."""
    parsed = parse_url(url)
    _check_scheme(parsed)
    backend: Backend = _resolve(parsed, _SYNC)(parsed)
    return backend


def open_async_backend(url: str) -> AsyncBackend:
    """The asyncio backend for ``url``: native where the driver has one, else threaded."""
    parsed = parse_url(url)
    _check_scheme(parsed)
    if parsed.scheme in _ASYNC:
        native: AsyncBackend = _resolve(parsed, _ASYNC)(parsed)
        return native
    from fencelock.backends.threaded import ThreadedAsyncBackend

    return ThreadedAsyncBackend(_resolve(parsed, _SYNC)(parsed))
