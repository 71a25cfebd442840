"""Backends by URL scheme: each family's package is imported only when its scheme is used.

A family (``memory``, ``sqlite``, ``redis``, ``redlock``, ``etcd``, ``zookeeper``,
``postgresql``, ``mysql``) offers
``open_sync(parsed)`` and ``open_async(parsed)``: native drivers where its I/O has both
colours, else the other colour through an adapter (:mod:`.threaded`, :mod:`.shared_loop`).
"""

from __future__ import annotations

import importlib

from fencelock.backends.base import AsyncBackend, Backend
from fencelock.engine.urls import ParsedURL, parse_url
from fencelock.errors import ConfigError

# scheme -> the family (a module of fencelock.backends) that serves it
_FAMILIES = {
    "memory": "memory",
    "sqlite": "sqlite",
    "redis": "redis",
    "rediss": "redis",
    "redis+unix": "redis",
    "redis+sentinel": "redis",
    "redis+cluster": "redis",
    "rediss+cluster": "redis",
    "unix": "redis",  # as redis-py reads it
    "redlock": "redlock",
    "redlocks": "redlock",
    "etcd": "etcd",
    "etcds": "etcd",
    "zookeeper": "zookeeper",
    "postgresql": "postgresql",
    "postgres": "postgresql",
    "postgresql+advisory": "postgresql",
    "postgres+advisory": "postgresql",
    "mysql": "mysql",
    "mariadb": "mysql",
}
# family -> the extra that installs its driver
_EXTRAS = {
    "redis": "redis",
    "redlock": "redis",
    "etcd": "etcd",
    "zookeeper": "zookeeper",
    "postgresql": "postgresql",
    "mysql": "mysql",
}

SCHEMES = tuple(sorted(_FAMILIES))


def _family(parsed: ParsedURL) -> object:
    family = _FAMILIES.get(parsed.scheme)
    if family is None:
        raise ConfigError(
            f"unknown scheme {parsed.scheme!r} in {parsed.redacted!r} "
            f"(supported: {', '.join(s + '://' for s in SCHEMES)})"
        )
    try:
        return importlib.import_module(f"fencelock.backends.{family}")
    except ModuleNotFoundError as exc:
        extra = _EXTRAS.get(family, family)
        raise ConfigError(
            f"{parsed.scheme}:// needs the {exc.name!r} package: pip install 'fencelock[{extra}]'"
        ) from exc


def open_backend(url: str) -> Backend:
    """The blocking backend for ``url``."""
    parsed = parse_url(url)
    backend: Backend = _family(parsed).open_sync(parsed)  # type: ignore[attr-defined]
    return backend


def open_async_backend(url: str) -> AsyncBackend:
    """The asyncio backend for ``url``."""
    parsed = parse_url(url)
    backend: AsyncBackend = _family(parsed).open_async(parsed)  # type: ignore[attr-defined]
    return backend
