"""What the sync and asyncio Redis backends share: options, keys, scripts, replies, errors."""

from __future__ import annotations

import contextlib
import functools
import ssl
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from redis.exceptions import RedisError

from fencelock.backends.base import Acquired, AttemptResult, Busy, LockInfo
from fencelock.backends.redis.wire import Partial, Script, pack
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
    """The source of ``backends/redis/lua/<name>.lua``."""
    return resources.files("fencelock.backends.redis").joinpath(f"lua/{name}.lua").read_text()


# Waiting: a free lease goes to whoever asks first, unless the oldest waiter has waited
# longer than STARVATION_BOUND; then it is kept for that waiter (fair=True: always).
# Barging keeps a busy lock fast (the releaser often takes it straight back, with no
# wake-up in between); the bound keeps every waiter's wait short.
STARVATION_BOUND = 0.02
# A waiter retries at least every WAITER_REFRESH, which keeps it alive in the queue;
# one silent for WAITER_LIVENESS is dropped. A waiter whose process died is dropped at
# once by the next release (its wake-up reaches nobody); only a paused one (SIGSTOP, a
# hung event loop) can hold the others up, and for at most WAITER_LIVENESS.
WAITER_LIVENESS = 3.0
WAITER_REFRESH = WAITER_LIVENESS / 3

ACQUIRE = Script(lua("acquire"))
FREE = Script(lua("free"))
RENEW = Script(lua("renew"))
Command = tuple[Script, bytes]


def acquire_command(keys: LockKeys, owner: str, ttl: float, channel: str, fair: bool) -> Command:
    """Take the lease (token included) or join the queue, woken on ``channel``."""
    return ACQUIRE, _acquire_partial(keys, ms(ttl), channel, fair).complete(owner)


@functools.lru_cache(maxsize=1024)
def _acquire_partial(keys: LockKeys, ttl_ms: int, channel: str, fair: bool) -> Partial:
    starve_us = 0 if fair else int(STARVATION_BOUND * 1e6)
    return ACQUIRE.partial(keys.queued, [ttl_ms, channel, starve_us, ms(WAITER_LIVENESS)])


def release_command(keys: LockKeys, owner: str) -> Command:
    return FREE, _release_partial(keys).complete(owner)


@functools.lru_cache(maxsize=4096)
def _release_partial(keys: LockKeys) -> Partial:
    return FREE.partial(keys.waking, [b"release"])


def leave_command(keys: LockKeys, owner: str, channel: str) -> Command:
    return FREE, FREE.call(keys.waking, [b"leave", owner, channel])


def renew_command(keys: LockKeys, owner: str, ttl: float) -> Command:
    return RENEW, RENEW.call((keys.lock,), [owner, ms(ttl)])


def ms(seconds: float) -> int:
    """Seconds as whole milliseconds, at least 1 (Redis TTLs are in ms)."""
    return max(int(seconds * 1000), 1)


@dataclass(frozen=True)
class LockKeys:
    """Keys of one lock, hash-tagged so they share a Redis Cluster slot."""

    lock: str
    token: str
    channel: str  # Redlock's release broadcast
    queue: str
    alive: str

    @classmethod
    def of(cls, name: str) -> LockKeys:
        return _keys_of(name)

    @property
    def queued(self) -> tuple[str, str, str, str]:
        """KEYS of acquire.lua: lock, token, queue, liveness."""
        return (self.lock, self.token, self.queue, self.alive)

    @property
    def waking(self) -> tuple[str, str, str]:
        """KEYS of free.lua: lock, queue, liveness."""
        return (self.lock, self.queue, self.alive)


@functools.lru_cache(maxsize=4096)
def _keys_of(name: str) -> LockKeys:
    tagged = f"{KEY_PREFIX}{{{name}}}"
    return LockKeys(
        lock=tagged,
        token=tagged + ":token",
        channel=tagged + ":free",
        queue=tagged + ":queue",
        alive=tagged + ":alive",
    )


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
    password: str | None = field(repr=False)
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
        ssl=_ssl_settings(parsed),
    )


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


def attempt_result(reply: list[Any]) -> AttemptResult:
    """Parse acquire.lua's ``{1, token}`` or ``{0, pttl}`` (we are queued then).

    A queued waiter wakes when the holder's TTL runs out, when woken, or at the
    latest after WAITER_REFRESH (to stay alive in the queue).
    """
    if reply[0] == 1:
        return Acquired(int(reply[1]))
    pttl = int(reply[1])
    return Busy(WAITER_REFRESH if pttl < 0 else min(pttl / 1000, WAITER_REFRESH))


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


DRIVER_ERRORS = (RedisError, OSError)


def translate(exc: BaseException, where: str, tls: bool = False) -> BackendUnavailable:
    """redis-py's exception as fencelock's, naming the server (``tls``: spoken over TLS)."""
    import redis.exceptions as rex

    failed_tls = tls_failure(where, exc, tls)
    if failed_tls is not None:
        return failed_tls
    if isinstance(exc, rex.AuthenticationError):
        return refused_credentials(where, str(exc))
    if isinstance(exc, rex.MovedError):
        return BackendUnavailable(
            f"{where} is a Redis Cluster node that does not own this lock's slot (MOVED {exc}); "
            "connect to the node that owns it"
        )
    if isinstance(exc, rex.NoPermissionError):
        return BackendUnavailable(f"{where} denied the command to this user (ACL): {exc}")
    if isinstance(exc, rex.ResponseError):
        text = str(exc)
        if text.startswith(("WRONGPASS", "NOAUTH", "NOPERM")) or _no_password_given(text):
            return refused_credentials(where, text)
        return BackendUnavailable(f"{where} failed: {text}")
    if isinstance(exc, (rex.TimeoutError, TimeoutError)):
        return BackendUnavailable(f"{where} did not answer in time: {exc}")
    if isinstance(exc, (rex.ConnectionError, OSError)):
        return BackendUnavailable(f"cannot reach {where}: {exc}")
    return BackendUnavailable(f"{where} failed: {exc}")


# What a server that requires a password says to a client that gave none: redis-py >= 6
# opens with HELLO, older versions with the first command, which a script call can be
# (too long for an unauthenticated client: "Protocol error: unauthenticated ...").
_NO_PASSWORD_GIVEN = (
    "NOAUTH",
    "Authentication required",
    "HELLO must be called with the client",
    "Protocol error: unauthenticated",
)


def _no_password_given(text: str) -> bool:
    return any(words in text for words in _NO_PASSWORD_GIVEN)


def refused_credentials(where: str, text: str) -> BackendUnavailable:
    """The error for a server's refusal ``text`` of a connection's credentials."""
    if _no_password_given(text):
        return BackendUnavailable(
            f"{where} requires authentication and the URL gives no password: "
            "redis://[user]:password@host:port/db (percent-encoded)"
        )
    return BackendUnavailable(f"{where} refused the credentials: {text}")


_PLAINTEXT_HINT = "is it a plaintext port? then leave TLS off: redis:// or redlock://"
_HOST_NAME_MISMATCH = (62, 64)  # X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH


def tls_failure(where: str, exc: BaseException, tls: bool) -> BackendUnavailable | None:
    """The error for a TLS connection that could not be set up, or None if ``exc`` is not one.

    Host name and certificate verification, a failed handshake, and a handshake that got
    no answer (what a plaintext server gives: it waits for a command that never ends).
    """
    for link in _causes(exc):
        if isinstance(link, ssl.SSLCertVerificationError):
            if link.verify_code in _HOST_NAME_MISMATCH:
                return BackendUnavailable(
                    f"cannot reach {where}: TLS host name verification failed: "
                    f"{link.verify_message}; connect by a name the certificate was issued for"
                )
            return BackendUnavailable(
                f"cannot reach {where}: TLS certificate verification failed: {link}"
            )
        if isinstance(link, ssl.SSLError):
            return BackendUnavailable(f"cannot reach {where}: TLS handshake failed: {link}")
        if isinstance(link, TimeoutError) and "handshake" in str(link):
            return BackendUnavailable(
                f"cannot reach {where}: TLS handshake failed: no TLS answer in time "
                f"({_PLAINTEXT_HINT})"
            )
    import redis.exceptions as rex

    if tls and isinstance(exc, (rex.TimeoutError, TimeoutError)) and "connecting" in str(exc):
        return tls_not_connected(where, "in time")
    return None


def tls_not_connected(where: str, within: str) -> BackendUnavailable:
    """No TLS connection ``within`` a time: TCP connect and handshake, not told apart."""
    return BackendUnavailable(
        f"cannot reach {where}: TLS handshake failed or no connection {within} ({_PLAINTEXT_HINT})"
    )


def _causes(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        yield link
        link = link.__cause__ or link.__context__


def unanswered(error: BaseException) -> bool:
    """True if ``error`` is a request that timed out: the server may have run it anyway."""
    import redis.exceptions as rex

    cause = error.__cause__
    return isinstance(cause, (rex.TimeoutError, TimeoutError))


# Once a server that timed out answers again, wait this long before undoing what an
# unanswered acquire may have taken: its buffered request runs first, then the undo.
UNDO_SETTLE = 0.1
UNDO_RETRY = 0.5


@contextlib.contextmanager
def translated(where: str, tls: bool = False) -> Iterator[None]:
    """Turn redis-py's exceptions into fencelock's, naming the server."""
    try:
        yield
    except DRIVER_ERRORS as exc:
        raise translate(exc, where, tls) from exc


def wait_after(options: RedisOptions) -> Callable[[Any], bytes | None]:
    """The follow-up of an acquire with ``wait_replicas``: ``WAIT`` once it succeeded."""
    command = pack([b"WAIT", options.wait_replicas, options.wait_timeout_ms])

    def follow_up(reply: Any) -> bytes | None:
        return command if reply[0] == 1 else None

    return follow_up


def not_replicated(options: RedisOptions, acked: int) -> BackendUnavailable:
    return BackendUnavailable(
        f"{options.where}: only {acked} of {options.wait_replicas} replicas acknowledged the "
        f"lock within {options.wait_timeout_ms} ms; not taking it (wait_replicas)"
    )
