"""Backends by URL scheme: each family's package is imported only when its scheme is used.

A family (``memory``, ``sqlite``, ``redis``, ``redlock``, ``etcd``, ``zookeeper``,
``postgresql``, ``mysql``) offers
``open_sync(parsed)`` and ``open_async(parsed)``: native drivers where its I/O has both
variants, else the other variant through an adapter (:mod:`.threaded`, :mod:`.shared_loop`).
A family's package imports its driver only inside those two, so this registry, the one
module outside the families that imports them, can import a family to ask it something
that needs no driver (the SQL it would run, the file it would open) on a plain install.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from fencelock.backends.base import AsyncBackend, Backend
from fencelock.engine.urls import ParsedURL, parse_url
from fencelock.errors import ConfigError

if TYPE_CHECKING:
    from fencelock.backends.redis.fence import RedisFence

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

_SQL_FAMILIES = ("postgresql", "mysql")

SCHEMES = tuple(sorted(_FAMILIES))


def _family(parsed: ParsedURL) -> Any:
    family = _FAMILIES.get(parsed.scheme)
    if family is None:
        raise ConfigError(
            f"unknown scheme {parsed.scheme!r} in {parsed.redacted!r} "
            f"(supported: {', '.join(s + '://' for s in SCHEMES)})"
        )
    return importlib.import_module(f"fencelock.backends.{family}")


@contextlib.contextmanager
def _driver_needed(parsed: ParsedURL) -> Iterator[None]:
    """A driver that is not installed, as the one line that says which extra installs it."""
    try:
        yield
    except ModuleNotFoundError as exc:
        if not exc.name or exc.name.split(".")[0] == "fencelock":
            raise  # fencelock's own module missing is a broken install, not a missing extra
        family = _FAMILIES[parsed.scheme]
        extra = _EXTRAS.get(family, family)
        raise ConfigError(
            f"{parsed.scheme}:// needs the {exc.name.split('.')[0]!r} package, "
            f"which is not installed: pip install 'fencelock[{extra}]'"
        ) from exc


def open_backend(url: str) -> Backend:
    """The blocking backend for ``url``."""
    backend: Backend = _opened(url, "open_sync")
    return backend


def open_async_backend(url: str) -> AsyncBackend:
    """The asyncio backend for ``url``."""
    backend: AsyncBackend = _opened(url, "open_async")
    return backend


def _opened(url: str, opener: str) -> Any:
    """The backend that ``url``'s family opens with its ``opener`` (``open_sync`` or
    ``open_async``)."""
    parsed = parse_url(url)
    with _driver_needed(parsed):
        return getattr(_family(parsed), opener)(parsed)


def url_of(target: object) -> object:
    """``target`` itself, or the URL of a redis-py client or pool handed to ``connect()``.

    The redis family is looked at only for an object that is not a string, so a plain
    install (no redis-py) never imports it."""
    if target is None or isinstance(target, str):
        return target
    from fencelock.backends.redis import from_client

    return from_client.url_from_redis(target) if from_client.is_redis_object(target) else target


def review_sql(url: str) -> str:
    """Every SQL statement the backend at ``url`` runs, for review (no driver, no connection)."""
    parsed = parse_url(url)
    family = _FAMILIES.get(parsed.scheme)
    if family not in _SQL_FAMILIES:
        raise ConfigError(
            f"{parsed.redacted!r} keeps no SQL schema: "
            "the SQL is for postgresql://, postgresql+advisory:// and mysql://"
        )
    review: str = _family(parsed).review_sql(parsed)
    return review


def sqlite_file(url: str) -> str | None:
    """The database file of an ``sqlite://`` URL, else None."""
    parsed = parse_url(url)
    if _FAMILIES.get(parsed.scheme) != "sqlite":
        return None
    path: str = _family(parsed).database_path(parsed)
    return path


def open_redis_fence(url: str) -> RedisFence:
    """The Redis half of :class:`fencelock.fencing.RedisGuard` (needs ``fencelock[redis]``)."""
    parsed = parse_url(url)
    if _FAMILIES.get(parsed.scheme) != "redis":
        raise ConfigError(f"a RedisGuard needs a redis:// URL, not {parsed.redacted!r}")
    with _driver_needed(parsed):
        from fencelock.backends.redis.fence import RedisFence as Fence

        return Fence(parsed)
