"""What the sync and asyncio Redis backends share: options, keys, scripts, replies, errors."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from typing import Any

from fencelock.backends.base import Acquired, AttemptResult, Busy, LockInfo
from fencelock.engine.urls import ParsedURL, flag_option, number_option, reject_unknown_options
from fencelock.errors import BackendUnavailable, ConfigError

KEY_PREFIX = "fencelock:"
_SSL_OPTIONS = {
    "ssl_ca_certs",
    "ssl_certfile",
    "ssl_keyfile",
    "ssl_cert_reqs",
    "ssl_check_hostname",
}
_OPTIONS = {"timeout", "connect_timeout", "wait_replicas", "wait_timeout"} | _SSL_OPTIONS


def lua(name: str) -> str:
    """The source of ``backends/lua/<name>.lua``."""
    return resources.files("fencelock.backends").joinpath(f"lua/{name}.lua").read_text()


class Scripts:
    """The lock scripts registered on one client, called with the right keys and args.

    Each call returns the reply for a ``redis.Redis`` client and an awaitable of it
    for a ``redis.asyncio.Redis`` client: the sync and asyncio backends share the
    calling conventions here and differ only in ``await``.
    """

    def __init__(self, client: Any) -> None:
        self._acquire = client.register_script(lua("acquire"))
        self._fair_acquire = client.register_script(lua("fair_acquire"))
        self._fair_leave = client.register_script(lua("fair_leave"))
        self._release = client.register_script(lua("release"))
        self._renew = client.register_script(lua("renew"))

    def acquire(self, keys: LockKeys, owner: str, ttl: float, fair: bool) -> Any:
        if fair:
            return self._fair_acquire(keys=keys.fair, args=[owner, ms(ttl), ms(FAIR_LIVENESS)])
        return self._acquire(keys=[keys.lock, keys.token], args=[owner, ms(ttl)])

    def leave_queue(self, keys: LockKeys, owner: str) -> Any:
        return self._fair_leave(keys=[keys.lock, *keys.fair[2:4]], args=[owner, keys.channel])

    def release(self, keys: LockKeys, owner: str) -> Any:
        return self._release(keys=[keys.lock], args=[owner, keys.channel])

    def renew(self, keys: LockKeys, owner: str, ttl: float) -> Any:
        return self._renew(keys=[keys.lock], args=[owner, ms(ttl)])


def ms(seconds: float) -> int:
    """Seconds as whole milliseconds, at least 1 (Redis TTLs are in ms)."""
    return max(int(seconds * 1000), 1)


@dataclass(frozen=True)
class LockKeys:
    """Keys of one lock, hash-tagged so they share a Redis Cluster slot."""

    lock: str
    token: str
    channel: str

    @classmethod
    def of(cls, name: str) -> LockKeys:
        tagged = f"{KEY_PREFIX}{{{name}}}"
        return cls(lock=tagged, token=tagged + ":token", channel=tagged + ":free")

    @property
    def fair(self) -> list[str]:
        """KEYS of fair_acquire.lua: lock, token, queue, liveness, arrival counter."""
        return [
            self.lock,
            self.token,
            self.lock + ":queue",
            self.lock + ":alive",
            self.lock + ":arrivals",
        ]


def name_of(key: str) -> str:
    return key[len(KEY_PREFIX) + 1 : -1]


def scan_pattern(prefix: str) -> str:
    return f"{KEY_PREFIX}{{{prefix}*}}"


@dataclass(frozen=True)
class RedisOptions:
    host: str
    port: int
    db: int
    username: str | None
    password: str | None
    tls: bool
    timeout: float
    connect_timeout: float
    wait_replicas: int
    wait_timeout_ms: int
    ssl: dict[str, Any]

    @property
    def where(self) -> str:
        return f"Redis at {self.host}:{self.port}"

    def client_kwargs(self, asyncio: bool = False) -> dict[str, Any]:
        """Keyword arguments for ``redis.Redis`` (or ``redis.asyncio.Redis``).

        No driver retries: redis-py would retry a dead or hung server for seconds
        with backoff, past a lease's TTL. fencelock's own loop decides when to retry.
        """
        from redis.backoff import NoBackoff

        if asyncio:
            from redis.asyncio.retry import Retry as AsyncRetry

            retry: Any = AsyncRetry(NoBackoff(), 0)
        else:
            from redis.retry import Retry

            retry = Retry(NoBackoff(), 0)
        kwargs: dict[str, Any] = {
            "retry": retry,
            "host": self.host,
            "port": self.port,
            "db": self.db,
            "username": self.username,
            "password": self.password,
            "socket_timeout": self.timeout,
            "socket_connect_timeout": self.connect_timeout,
            "decode_responses": True,
        }
        if self.tls:
            kwargs.update(ssl=True, **self.ssl)
        return kwargs


def redis_options(parsed: ParsedURL, host: tuple[str, int | None] | None = None) -> RedisOptions:
    """Options for one Redis server, from a ``redis://`` or ``rediss://`` URL."""
    reject_unknown_options(parsed, _OPTIONS)
    if host is None:
        if len(parsed.hosts) != 1:
            raise ConfigError(
                f"{parsed.scheme}:// takes exactly one host, got {len(parsed.hosts)} in "
                f"{parsed.redacted!r}; for several independent masters use redlock://"
            )
        host = parsed.hosts[0]
    db_text = parsed.path.strip("/") or "0"
    if not db_text.isdigit():
        raise ConfigError(
            f"Redis database must be a number, got {db_text!r} in {parsed.redacted!r}"
        )
    ssl: dict[str, Any] = {k: v for k, v in parsed.options.items() if k in _SSL_OPTIONS}
    if "ssl_check_hostname" in ssl:
        ssl["ssl_check_hostname"] = flag_option(parsed, "ssl_check_hostname")
    return RedisOptions(
        host=host[0],
        port=host[1] or 6379,
        db=int(db_text),
        username=parsed.username,
        password=parsed.password,
        tls=parsed.scheme in ("rediss", "redlocks") or parsed.options.get("tls") == "1",
        timeout=number_option(parsed, "timeout", 2.0),
        connect_timeout=number_option(parsed, "connect_timeout", 2.0),
        wait_replicas=int(number_option(parsed, "wait_replicas", 0, allow_zero=True)),
        wait_timeout_ms=int(number_option(parsed, "wait_timeout", 0.1) * 1000),
        ssl=ssl,
    )


# A fair waiter retries at least this often, to stay alive in the queue (the script
# drops waiters silent for FAIR_LIVENESS).
FAIR_LIVENESS = 3.0
FAIR_REFRESH = FAIR_LIVENESS / 3


def attempt_result(reply: list[Any], fair: bool = False) -> AttemptResult:
    """Parse the acquire script's ``{1, token}`` or ``{0, pttl}``."""
    if int(reply[0]) == 1:
        return Acquired(int(reply[1]))
    pttl = int(reply[1])
    if fair:
        return Busy(FAIR_REFRESH if pttl < 0 else min(pttl / 1000, FAIR_REFRESH))
    return Busy(pttl / 1000 if pttl >= 0 else None)


def lock_info(
    name: str, owner: str | None, pttl: int, token: str | None, waiters: int | None = None
) -> LockInfo | None:
    if owner is None and token is None:
        return None
    return LockInfo(
        name=name,
        owner=owner,
        token=int(token or 0),
        remaining=pttl / 1000 if owner is not None and pttl >= 0 else None,
        waiters=waiters,
    )


@contextlib.contextmanager
def translated(where: str) -> Iterator[None]:
    """Turn redis-py's exceptions into fencelock's, naming the server."""
    import redis.exceptions as rex

    try:
        yield
    except rex.AuthenticationError as exc:
        raise BackendUnavailable(f"{where} refused the credentials: {exc}") from exc
    except rex.MovedError as exc:
        raise BackendUnavailable(
            f"{where} is a Redis Cluster node that does not own this lock's slot (MOVED {exc}); "
            "connect to the node that owns it"
        ) from exc
    except rex.NoPermissionError as exc:
        raise BackendUnavailable(f"{where} denied the command to this user (ACL): {exc}") from exc
    except rex.ResponseError as exc:
        text = str(exc)
        if text.startswith(("WRONGPASS", "NOAUTH", "NOPERM")):
            raise BackendUnavailable(f"{where} refused the credentials: {text}") from exc
        raise BackendUnavailable(f"{where} failed: {text}") from exc
    except (rex.TimeoutError, TimeoutError) as exc:
        raise BackendUnavailable(f"{where} did not answer in time: {exc}") from exc
    except (rex.ConnectionError, OSError) as exc:
        raise BackendUnavailable(f"cannot reach {where}: {exc}") from exc
    except rex.RedisError as exc:
        raise BackendUnavailable(f"{where} failed: {exc}") from exc


def not_replicated(options: RedisOptions, acked: int) -> BackendUnavailable:
    return BackendUnavailable(
        f"{options.where}: only {acked} of {options.wait_replicas} replicas acknowledged the "
        f"lock within {options.wait_timeout_ms} ms; not taking it (wait_replicas)"
    )
