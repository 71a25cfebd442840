"""The settings of one Redis server, read from a ``redis://`` (or ``redlock://``) URL."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fencelock.engine.urls import ParsedURL, flag_option, number_option, reject_unknown_options
from fencelock.errors import ConfigError

_SSL_OPTIONS = {
    "ssl_ca_certs",
    "ssl_certfile",
    "ssl_keyfile",
    "ssl_cert_reqs",
    "ssl_check_hostname",
}
_OPTIONS = {"timeout", "connect_timeout", "wait_replicas", "wait_timeout", "keys"} | _SSL_OPTIONS
KEY_STYLES = ("fencelock", "bare")
UNIX_SCHEMES = ("redis+unix", "unix")  # redis-py's unix:// too
SENTINEL_SCHEMES = ("redis+sentinel",)
CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")


@dataclass(frozen=True)
class RedisOptions:
    host: str
    port: int
    db: int
    username: str | None
    password: str | None = field(repr=False)
    tls: bool
    timeout: float
    connect_timeout: float
    wait_replicas: int
    wait_timeout_ms: int
    ssl: dict[str, Any]
    unix_socket: str | None = None  # a local server's socket path, instead of host:port
    sentinels: tuple[tuple[str, int], ...] = ()  # ask these for the master of ``service``
    service: str = ""
    bare_keys: bool = False  # keys=bare: each lock at its name (scripts.KeyStyle)

    @property
    def where(self) -> str:
        if self.sentinels:
            asked = ",".join(f"{host}:{port}" for host, port in self.sentinels)
            return f"Redis master {self.service!r} (sentinels {asked})"
        if self.unix_socket is not None:
            return f"Redis at unix:{self.unix_socket}"
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
        if self.unix_socket is not None:
            del kwargs["host"], kwargs["port"]
            kwargs["unix_socket_path"] = self.unix_socket
        return kwargs


def redis_options(parsed: ParsedURL, host: tuple[str, int | None] | None = None) -> RedisOptions:
    """Options for one Redis server, from a ``redis://`` or ``rediss://`` URL, a
    ``redis+unix:///path/to/redis.sock?db=N`` one, or a
    ``redis+sentinel://h1:26379,h2:26379/SERVICE/DB`` one (the master Sentinel names)."""
    if parsed.scheme in UNIX_SCHEMES:
        return _unix_options(parsed)
    if parsed.scheme in SENTINEL_SCHEMES:
        return _sentinel_options(parsed)
    reject_unknown_options(parsed, _OPTIONS)
    if host is None:
        if len(parsed.hosts) != 1:
            raise ConfigError(
                f"{parsed.scheme}:// takes exactly one host, got {len(parsed.hosts)} in "
                f"{parsed.redacted!r}; for several independent masters use redlock://"
            )
        host = parsed.hosts[0]
    return _options(
        parsed,
        parsed.path.strip("/") or "0",
        host=host[0],
        port=host[1] or 6379,
        tls=parsed.scheme in ("rediss", "redlocks", "rediss+cluster")
        or parsed.options.get("tls") == "1",
        ssl=_ssl_settings(parsed),
    )


def cluster_seeds(parsed: ParsedURL) -> list[tuple[str, int]]:
    """The nodes a ``redis+cluster://h1:6379,h2:6379`` URL names to learn the cluster
    from (any of them will do); its other settings are each node's."""
    reject_unknown_options(parsed, _OPTIONS)
    if not parsed.hosts or parsed.path.strip("/") not in ("", "0"):
        raise ConfigError(
            f"{parsed.scheme}:// takes one or more of the cluster's nodes and no database "
            f"but 0 (a cluster has only that one), as in redis+cluster://h1:6379,h2:6379; "
            f"got {parsed.redacted!r}"
        )
    return [(host, port or 6379) for host, port in parsed.hosts]


def _options(parsed: ParsedURL, db_text: str, **where: Any) -> RedisOptions:
    """What every form of URL sets alike (database, credentials, timeouts, replicas),
    and ``where`` the server is (host and port, a socket, or the sentinels)."""
    if not db_text.isdigit():
        raise ConfigError(
            f"Redis database must be a number, got {db_text!r} in {parsed.redacted!r}"
        )
    fields: dict[str, Any] = {"host": "", "port": 0, "tls": False, "ssl": {}, **where}
    style = parsed.options.get("keys", "fencelock")
    if style not in KEY_STYLES:
        raise ConfigError(
            f"option keys={style!r} must be fencelock (the default: fencelock:{{NAME}}) or "
            f"bare (the lock at the key NAME, as redis-py's Lock keeps it) in {parsed.redacted!r}"
        )
    return RedisOptions(
        bare_keys=style == "bare",
        db=int(db_text),
        username=parsed.username,
        password=parsed.password,
        timeout=number_option(parsed, "timeout", 2.0),
        connect_timeout=number_option(parsed, "connect_timeout", 2.0),
        wait_replicas=int(number_option(parsed, "wait_replicas", 0, allow_zero=True)),
        wait_timeout_ms=int(number_option(parsed, "wait_timeout", 0.1) * 1000),
        **fields,
    )


def _sentinel_options(parsed: ParsedURL) -> RedisOptions:
    """The master Sentinel names: the URL's hosts are the sentinels, its path
    ``/SERVICE/DB``; the user and password are the master's."""
    reject_unknown_options(parsed, _OPTIONS - _SSL_OPTIONS)
    service, _, db_text = parsed.path.strip("/").partition("/")
    if not parsed.hosts or not service:
        raise ConfigError(
            f"{parsed.scheme}:// takes the sentinels and the service, as in "
            f"redis+sentinel://s1:26379,s2:26379/mymaster/0; got {parsed.redacted!r}"
        )
    sentinels = tuple((host, port or 26379) for host, port in parsed.hosts)
    return _options(parsed, db_text or "0", sentinels=sentinels, service=service)


def redis_client(options: RedisOptions, asyncio: bool = False) -> Any:
    """A redis-py client for ``options``: the master that Sentinel names (asked anew at
    each new connection, so a failover is followed), else the server itself."""
    kwargs = options.client_kwargs(asyncio)
    if not options.sentinels:
        if asyncio:
            import redis.asyncio

            return redis.asyncio.Redis(**kwargs)
        import redis

        return redis.Redis(**kwargs)
    del kwargs["host"], kwargs["port"]
    timeouts = {
        "socket_timeout": options.timeout,
        "socket_connect_timeout": options.connect_timeout,
    }
    if asyncio:
        from redis.asyncio.sentinel import Sentinel as AsyncSentinel

        sentinel: Any = AsyncSentinel(list(options.sentinels), **timeouts)  # type: ignore[no-untyped-call]
    else:
        from redis.sentinel import Sentinel

        sentinel = Sentinel(list(options.sentinels), **timeouts)  # type: ignore[no-untyped-call]
    return sentinel.master_for(options.service, **kwargs)


def close_client(client: Any) -> None:
    """Close a client of :func:`redis_client`, and the ones Sentinel was asked with."""
    client.close()
    for sentinel in _sentinels_of(client):
        sentinel.close()


async def aclose_client(client: Any) -> None:
    """:func:`close_client` for a ``redis.asyncio`` client."""
    await client.aclose()
    for sentinel in _sentinels_of(client):
        await sentinel.aclose()


def _sentinels_of(client: Any) -> list[Any]:
    manager = getattr(client.connection_pool, "sentinel_manager", None)
    return list(getattr(manager, "sentinels", ()))


def _unix_options(parsed: ParsedURL) -> RedisOptions:
    """A server on this host, through its unix socket: the URL's path; ``?db=N``."""
    reject_unknown_options(
        parsed, {"timeout", "connect_timeout", "wait_replicas", "wait_timeout", "db", "keys"}
    )
    if parsed.hosts or not parsed.path.startswith("/"):
        raise ConfigError(
            f"{parsed.scheme}:// takes the socket's absolute path, as in "
            f"redis+unix:///run/redis/redis.sock?db=0; got {parsed.redacted!r}"
        )
    return _options(parsed, parsed.options.get("db", "0"), unix_socket=parsed.path)


def _ssl_settings(parsed: ParsedURL) -> dict[str, Any]:
    """The ``ssl_*`` options, with ``ssl_check_hostname`` always said explicitly.

    redis-py < 6 does not check the server's host name unless told to (6 does), and
    ``redis>=5`` is allowed: every TLS connection checks it unless the URL says
    ``ssl_check_hostname=false``, or verifies no certificate (``ssl_cert_reqs=none``).
    """
    settings: dict[str, Any] = {k: v for k, v in parsed.options.items() if k in _SSL_OPTIONS}
    reqs = str(settings.get("ssl_cert_reqs", "required")).lower()
    if reqs not in ("none", "optional", "required"):
        raise ConfigError(
            f"option ssl_cert_reqs={parsed.options['ssl_cert_reqs']!r} must be none, "
            f"optional or required in {parsed.redacted!r}"
        )
    if "ssl_cert_reqs" in settings:
        settings["ssl_cert_reqs"] = reqs
    check = reqs != "none"
    if "ssl_check_hostname" in settings:
        check = flag_option(parsed, "ssl_check_hostname")
        if check and reqs == "none":
            raise ConfigError(
                f"ssl_check_hostname=true needs a verified certificate, but ssl_cert_reqs=none "
                f"in {parsed.redacted!r}"
            )
    settings["ssl_check_hostname"] = check
    return settings
