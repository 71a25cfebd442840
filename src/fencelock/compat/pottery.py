"""pottery's ``Redlock`` and ``synchronize``, over fencelock: ``Redlock(key=KEY,
masters={redis})``, with a fencing token on every hold.

The signature, return values and errors are pottery's (its own exception classes when
pottery is installed, classes of the same names and fields otherwise). The masters'
connection settings make one fencelock client: one master is ``redis://`` (the lock at
pottery's key, ``redlock:KEY``), several are ``redlock://`` over all of them (the
lock's keys under ``fencelock:{redlock:KEY}`` on every node). What differs, for safety:

- **Interop.** Over one master, a face and pottery on one key exclude each other (both
  ``SET redlock:KEY ... NX PX``), so services can move over one process at a time.
  Over several masters they do not: fencelock's Redlock keeps its keys (and its token
  counters) apart from pottery's, so a face and a pottery process could both hold
  ``KEY``. Move every process on a multi-master key at once.
- ``auto_release_time`` is a lease of that many seconds, **not renewed**, as in
  pottery: a hold ends by then unless ``extend()`` (at most ``num_extensions`` times).
  Work that may overrun it passes :attr:`Redlock.fencing_token` to the resource,
  which then refuses the late holder's write; leaving ``with`` raises
  ``ReleaseUnlockedLock`` as pottery's does. (To hold until done, renewed, take
  fencelock's own lock: ``client.lock(name, ttl=10)``.)
- ``locked()`` is pottery's (seconds this object may still act, 0 if it holds nothing):
  what the lease is trusted for, measured from before the acquiring request, and 0
  once the server shows another owner.
- Several masters must be at least 3 independent servers (``host:port`` each, one
  database, credentials and TLS alike): two masters (one down stops every lock) or
  databases of one server (they fail together: one node) are a ``ConfigError``. A
  single master may be TCP, TLS or a unix socket.
- ``auto_release_time`` under 10 ms is a ``ConfigError`` (pottery's acquire fails then
  every time). Waiting is woken by the release, not a poll every 0-200 ms.
- A release that cannot reach the servers is logged and the hold ends by its TTL
  (pottery raises ``ReleaseUnlockedLock``, as if another owner had it). A server that
  cannot be reached while acquiring, extending or asking ``locked()`` is, as in pottery,
  a failed call, or ``QuorumIsImpossible`` with ``raise_on_redis_errors``.
- fencelock opens connections of its own with the masters' settings: nothing goes
  through the ``redis.Redis`` objects themselves (patching them changes nothing).
  pottery's INFO lines (``sample#redlock.enqueued...``, ``synchronize``'s waited/held)
  go to the ``pottery`` logger as pottery's do.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import logging
import math
import os
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar, cast
from urllib.parse import urlsplit

from fencelock.compat import needs_redis

try:
    import redis
except ImportError as missing:  # a plain install
    raise needs_redis("fencelock.compat.pottery is pottery's Redlock over fencelock") from missing

import fencelock
from fencelock.backends import url_of
from fencelock.compat.redis_py import client_of
from fencelock.engine.names import validate_name
from fencelock.engine.redlock import validate_node_count
from fencelock.engine.timing import validate_ttl
from fencelock.errors import BackendUnavailable, ConfigError, FencelockError, LeaseLost, LockTimeout
from fencelock.lease import Lease

logger = logging.getLogger(__name__)
_pottery_log = logging.getLogger("pottery")  # pottery's INFO lines, for log-based metrics

F = TypeVar("F", bound=Callable[..., Any])

_NAMES = (
    "QuorumNotAchieved",
    "TooManyExtensions",
    "ExtendUnlockedLock",
    "ReleaseUnlockedLock",
    "QuorumIsImpossible",
)


def _exceptions() -> tuple[type[Exception], tuple[type[RuntimeError], ...]]:
    try:
        exceptions: Any = importlib.import_module("pottery.exceptions")
    except ImportError:  # the face works without pottery installed

        @dataclass
        class PrimitiveError(Exception):
            """Base exception class for distributed primitives."""

            key: str
            masters: Iterable[Any]
            redis_errors: Iterable[Exception] = ()

        PrimitiveError.__module__, PrimitiveError.__qualname__ = __name__, "PrimitiveError"
        return PrimitiveError, tuple(
            type(name, (PrimitiveError, RuntimeError), {"__module__": __name__}) for name in _NAMES
        )
    return exceptions.PrimitiveError, tuple(getattr(exceptions, name) for name in _NAMES)


(
    PrimitiveError,
    (
        QuorumNotAchieved,
        TooManyExtensions,
        ExtendUnlockedLock,
        ReleaseUnlockedLock,
        QuorumIsImpossible,
    ),
) = _exceptions()


_default: list[Any] = []
_redlock_clients: dict[str, fencelock.Client] = {}
_mutex = threading.Lock()


def _default_master() -> Any:
    """pottery's default master: ``$REDIS_URL``, else ``redis://localhost:6379/0``."""
    with _mutex:
        if not _default:
            url = os.environ.get("REDIS_URL", "redis://localhost:6379/0")
            _default.append(redis.Redis.from_url(url, socket_timeout=1))
        return _default[0]


def redlock_url(masters: Iterable[Any]) -> str:
    """The ``redlock://`` (or ``redlocks://``) URL of several redis-py clients: each
    one's host and port, and the settings they share (credentials, database, timeouts,
    TLS), which must be alike: fencelock applies one set of them to every node."""
    parts = [urlsplit(str(url_of(master))) for master in masters]
    if any(part.scheme not in ("redis", "rediss") for part in parts):
        raise ConfigError("Redlock's masters must be Redis servers over TCP, not unix sockets")
    servers = [part.netloc.rpartition("@")[2] for part in parts]
    if len(set(servers)) < len(servers):
        raise ConfigError(
            f"pottery's masters {sorted(servers)} name one server more than once: its "
            "databases are one node, not independent masters (Redlock needs at least 3 "
            "servers; for one, pass one master)"
        )
    shared = {
        (part.scheme, part.netloc.rpartition("@")[0], part.path, part.query) for part in parts
    }
    if len(shared) > 1:
        raise ConfigError(
            "pottery's masters differ in TLS, credentials, database number or timeouts; "
            "fencelock's redlock:// applies one set of them to every node"
        )
    scheme, user, path, query = shared.pop()
    hosts = ",".join(sorted(servers))
    return (
        f"{'redlocks' if scheme == 'rediss' else 'redlock'}://"
        + (f"{user}@" if user else "")
        + f"{hosts}{path}"
        + (f"?{query}" if query else "")
    )


def client_for(masters: frozenset[Any]) -> fencelock.Client:
    """One master: its client of :func:`fencelock.compat.redis_py.client_of` (bare
    keys: the lock at pottery's key). Several: one ``redlock://`` client per set of
    servers, kept for the life of the process."""
    if len(masters) == 1:
        return client_of(next(iter(masters)))
    url = redlock_url(masters)
    with _mutex:
        client = _redlock_clients.get(url)
        if client is None:
            client = _redlock_clients[url] = fencelock.connect(url)
        return client


def _redis_errors(error: BaseException) -> tuple[Exception, ...]:
    """The driver's errors that ``error`` was raised from, for pottery's ``redis_errors``."""
    found: list[Exception] = []
    cause = error.__cause__ or error.__context__
    for _ in range(16):  # a chain, however long (or looped), is looked at this far
        if cause is None:
            break
        if isinstance(cause, redis.RedisError):
            found.append(cause)
        cause = cause.__cause__ or cause.__context__
    return tuple(found)


class Redlock:
    """pottery's ``Redlock`` over a fencelock lease (the module docstring says what
    differs). Not for one object shared by several threads at once, as pottery's.

    ``auto_release_time`` defaults to 10 seconds and ``num_extensions`` defaults to 3,
    as in pottery."""

    __slots__ = (
        "_client",
        "_extension_num",
        "_key",
        "_lease",
        "auto_release_time",
        "context_manager_blocking",
        "context_manager_timeout",
        "masters",
        "num_extensions",
        "raise_on_redis_errors",
    )

    _key: str
    _KEY_PREFIX: ClassVar[str] = "redlock"
    _AUTO_RELEASE_TIME: ClassVar[float] = 10
    _NUM_EXTENSIONS: ClassVar[int] = 3
    _RETRY_DELAY: ClassVar[float] = 0.2  # between tries while the servers cannot be reached

    def __init__(
        self,
        *,
        key: str,
        masters: Iterable[Any] = frozenset(),
        raise_on_redis_errors: bool = False,
        auto_release_time: float = _AUTO_RELEASE_TIME,
        num_extensions: int = _NUM_EXTENSIONS,
        context_manager_blocking: bool = True,
        context_manager_timeout: float = -1,
    ) -> None:
        if not context_manager_blocking and context_manager_timeout != -1:
            raise ValueError("can't specify a timeout for a non-blocking call")
        self.key = key
        self.masters: frozenset[Any] = frozenset(masters) or frozenset({_default_master()})
        self.raise_on_redis_errors = raise_on_redis_errors
        self.auto_release_time = auto_release_time
        self.num_extensions = num_extensions
        self.context_manager_blocking = context_manager_blocking
        self.context_manager_timeout = context_manager_timeout
        self._client: fencelock.Client | None = None  # connected at the first acquire
        self._lease: Lease | None = None
        self._extension_num = 0
        validate_name(self.key)  # bad settings fail here, not at the first acquire
        validate_ttl(auto_release_time, "auto_release_time")
        if len(self.masters) > 1:
            validate_node_count(len(self.masters))
            redlock_url(self.masters)

    @property
    def key(self) -> str:
        """pottery's key, ``redlock:KEY``: the fencelock lock's name."""
        return self._key

    @key.setter
    def key(self, value: str) -> None:
        self._key = f"{self._KEY_PREFIX}:{value}"

    @property
    def fencing_token(self) -> int | None:
        """The fencing token of this object's hold (None when it holds nothing): pass it
        to the resource, which refuses a write with a token older than one it has seen."""
        return None if self._lease is None else self._lease.token

    def _lock(self) -> fencelock.Lock:
        """The lock, on the masters' client (connected now if it is not yet: as
        pottery's, making a Redlock does not reach the servers)."""
        if self._client is None:
            self._client = client_for(self.masters)
        return self._client.lock(self.key, ttl=self.auto_release_time, renew=False)

    def acquire(
        self,
        *,
        blocking: bool = True,
        timeout: float = -1,
        raise_on_redis_errors: bool | None = None,
    ) -> bool:
        """Take the lock: True once held. ``blocking=False`` tries once; ``timeout``
        (seconds; -1: as long as it takes) bounds a blocking wait; False when it gave up.
        An object that holds the lock already waits for its own hold to end, as
        pottery's does."""
        if not blocking and timeout != -1:
            raise ValueError("can't specify a timeout for a non-blocking call")
        wait = 0.0 if not blocking else None if timeout == -1 else max(float(timeout), 0.0)
        began = time.monotonic()
        deadline = None if wait is None else began + wait
        self._forget_ended()
        unreachable = False
        while True:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            try:
                lease = self._lock()._acquire(left, holder=object())  # each try on its own
            except LockTimeout:
                return self._gave_up(began, blocking)
            except BackendUnavailable as exc:
                self._unavailable(exc, raise_on_redis_errors)
                if left is not None and left <= 0:
                    return self._gave_up(began, blocking)
                logger.warning("could not reach %s's servers (%s); trying again", self.key, exc)
                time.sleep(random.uniform(0, min(self._RETRY_DELAY, left or self._RETRY_DELAY)))  # noqa: S311 (retry jitter)
                unreachable = True
                continue
            self._took(lease)
            if blocking and (unreachable or lease.attempts > 1):
                self._log_enqueued(began, acquired=True)
            return True

    def _gave_up(self, began: float, blocking: bool) -> Literal[False]:
        if blocking:
            self._log_enqueued(began, acquired=False)
        return False

    def _log_enqueued(self, began: float, acquired: bool) -> None:
        """pottery's line after a blocking acquire that had to wait."""
        suffix = self.key.split(":", 1)[1]
        _pottery_log.info(
            "source=pottery sample#redlock.enqueued.%s=%dms sample#redlock.acquired.%s=%d",
            suffix,
            math.ceil((time.monotonic() - began) * 1000),
            suffix,
            acquired,
        )

    def _took(self, lease: Lease) -> None:
        old, self._lease, self._extension_num = self._lease, lease, 0
        if old is not None:  # its own earlier hold, ended (the key was free)
            self._forget(old)

    def _forget_ended(self) -> None:
        """Let go of this object's hold if it already ended (expired or lost)."""
        lease = self._lease
        if lease is not None and lease.remaining() <= 0:
            self._lease = None
            self._forget(lease)

    @staticmethod
    def _forget(lease: Lease) -> None:
        with contextlib.suppress(FencelockError):
            lease.release()  # a hold that ended: the client stops keeping it

    def _unavailable(self, error: BackendUnavailable, raise_on_redis_errors: bool | None) -> None:
        if self.raise_on_redis_errors if raise_on_redis_errors is None else raise_on_redis_errors:
            raise QuorumIsImpossible(self.key, self.masters, _redis_errors(error)) from error

    def locked(self, *, raise_on_redis_errors: bool | None = None) -> float:
        """Seconds this object may still act on its hold; 0 if it holds none (its hold
        ended, or the servers show another owner)."""
        lease, client = self._lease, self._client
        if lease is None or client is None or lease.remaining() <= 0:
            return 0
        try:
            info = client.inspect(self.key)
        except BackendUnavailable as exc:
            self._unavailable(exc, raise_on_redis_errors)
            return 0
        if info is None or info.owner != lease.owner:
            return 0
        return lease.remaining()

    def extend(self, *, raise_on_redis_errors: bool | None = None) -> None:
        """Make the hold's time left ``auto_release_time`` again (at most
        ``num_extensions`` times per hold: ``TooManyExtensions``); ``ExtendUnlockedLock``
        if this object holds nothing or its hold ended."""
        if self._extension_num >= self.num_extensions:
            raise TooManyExtensions(self.key, self.masters)
        lease = self._lease
        if lease is None or lease.released:
            raise ExtendUnlockedLock(self.key, self.masters)
        try:
            lease.extend(self.auto_release_time)
        except LeaseLost as exc:
            raise ExtendUnlockedLock(self.key, self.masters) from exc
        except BackendUnavailable as exc:
            self._unavailable(exc, raise_on_redis_errors)
            raise ExtendUnlockedLock(self.key, self.masters, _redis_errors(exc)) from exc
        self._extension_num += 1

    def release(self, *, raise_on_redis_errors: bool | None = None) -> None:
        """Give the lock back; ``ReleaseUnlockedLock`` if this object holds nothing, or
        its hold ended before (the work under it was not protected past that)."""
        lease, self._lease = self._lease, None
        if lease is None or lease.released:
            raise ReleaseUnlockedLock(self.key, self.masters)
        try:
            lease.release()
        except LeaseLost as exc:
            raise ReleaseUnlockedLock(self.key, self.masters) from exc

    def __enter__(self) -> Redlock:
        if self.acquire(
            blocking=self.context_manager_blocking, timeout=self.context_manager_timeout
        ):
            return self
        raise QuorumNotAchieved(self.key, self.masters)

    def __exit__(self, *exc_info: object) -> Literal[False]:
        self.release()
        return False

    def __repr__(self) -> str:
        return f"<{type(self).__qualname__} key={self.key}>"


def synchronize(
    *,
    key: str,
    masters: Iterable[Any] = frozenset(),
    raise_on_redis_errors: bool = False,
    auto_release_time: float = Redlock._AUTO_RELEASE_TIME,
    blocking: bool = True,
    timeout: float = -1,
) -> Callable[[F], F]:
    """pottery's decorator: the function's calls run one at a time, each holding a
    :class:`Redlock` on ``key`` (``QuorumNotAchieved`` if it is not acquired)."""
    masters = frozenset(masters)
    make = functools.partial(
        Redlock,
        key=key,
        masters=masters,
        raise_on_redis_errors=raise_on_redis_errors,
        auto_release_time=auto_release_time,
        context_manager_blocking=blocking,
        context_manager_timeout=timeout,
    )
    make()  # bad settings fail at decoration, not at the first call

    def decorator(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            began, entered = time.monotonic(), None
            try:
                with make():
                    entered = time.monotonic()
                    return func(*args, **kwargs)
            finally:
                _log_synchronize(func, key, began, entered)

        return cast(F, wrapper)

    return decorator


def _log_synchronize(
    func: Callable[..., Any], key: str, began: float, entered: float | None
) -> None:
    """pottery's line after each call of a synchronized function."""
    now, name = time.monotonic(), f"{Redlock._KEY_PREFIX}:{key}"
    if entered is None:
        _pottery_log.info(
            "%s() waited for %s for %d ms; never acquired lock",
            func.__qualname__,
            name,
            (now - began) * 1000,
        )
    else:
        _pottery_log.info(
            "%s() waited for %s for %d ms; held for %d ms",
            func.__qualname__,
            name,
            (entered - began) * 1000,
            (now - entered) * 1000,
        )
