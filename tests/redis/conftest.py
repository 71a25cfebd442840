"""Real ``redis-server`` processes for the Redis-specific tests, and small helpers.

Servers come from a :class:`fencelock.testing.ServerPool`; every pool stops all of
its servers when its fixture ends, also when a test failed or left a server paused
(``stop`` sends SIGCONT first). Tests that pause or kill a server take the
function-scoped ``servers`` pool; tests that only read and write share ``plain_redis``.
"""

from __future__ import annotations

import secrets
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

import pytest

import fencelock
from fencelock.testing import RedisServer, ServerPool, require_binary, waiter_timing

T = TypeVar("T")


@pytest.fixture(scope="session")
def session_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerPool]:
    pool = ServerPool(tmp_path_factory.mktemp)
    yield pool
    pool.stop_all()


@pytest.fixture(scope="module")
def module_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerPool]:
    pool = ServerPool(tmp_path_factory.mktemp)
    yield pool
    pool.stop_all()


@pytest.fixture
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerPool]:
    """Servers of one test (for tests that pause, kill or promote them)."""
    pool = ServerPool(tmp_path_factory.mktemp)
    yield pool
    pool.stop_all()


@pytest.fixture(scope="session")
def plain_redis(session_servers: ServerPool) -> RedisServer:
    """One plain redis-server shared by the tests that neither pause nor kill it."""
    return session_servers.redis(name="plain")


@pytest.fixture
def name() -> str:
    """A lock name no other test uses."""
    return f"t{secrets.token_hex(4)}/lock"


def redis_cli(port: int, *args: str, user: str | None = None, password: str | None = None) -> str:
    """``redis-cli -p PORT ARGS...`` with optional ACL credentials; stdout, stripped."""
    auth = ["--no-auth-warning"]
    if user is not None:
        auth += ["--user", user]
    if password is not None:
        auth += ["--pass", password]
    done = subprocess.run(
        [require_binary("redis-cli", "redis-tools"), "-p", str(port), *auth, *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=10,
    )
    return done.stdout.strip()


def unread_bytes(port: int, state: str = "established") -> int:
    """Bytes that arrived on the server side of connections to ``port`` in ``state``
    (or "close_wait": the client hung up) that the server has not read yet (a paused
    server's pending requests); from /proc/net/tcp."""
    code = {"established": "01", "close_wait": "08"}[state]
    unread = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as rows:
            for row in list(rows)[1:]:
                fields = row.split()
                if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == code:
                    unread += int(fields[4].split(":")[1], 16)
    return unread


class Background(Generic[T]):
    """Runs ``fn`` on a daemon thread, remembering its result or exception and duration.

    For calls that may hang: wait for them with a deadline, then undo the fault
    (resume the server) and join, so a failing test never leaves a thread stuck.
    """

    def __init__(self, fn: Callable[[], T]) -> None:
        self._fn = fn
        self.value: T | None = None
        self.error: BaseException | None = None
        self.elapsed: float | None = None
        self._done = threading.Event()
        self._started = time.monotonic()
        threading.Thread(target=self._run, daemon=True, name="test-background").start()

    def _run(self) -> None:
        try:
            self.value = self._fn()
        except BaseException as exc:
            self.error = exc
        finally:
            self.elapsed = time.monotonic() - self._started
            self._done.set()

    def wait(self, timeout: float) -> bool:
        """True if ``fn`` finished within ``timeout`` seconds (from now)."""
        return self._done.wait(timeout)

    def outcome(self) -> str:
        if not self._done.is_set():
            return "still running"
        if self.error is not None:
            return f"raised {type(self.error).__name__}: {self.error} after {self.elapsed:.2f}s"
        return f"returned {self.value!r} after {self.elapsed:.2f}s"


@pytest.fixture
def slow_refresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Waiters in this process refresh their queue place every 10 s, not every second:
    a wake-up that went missing then shows as a wait of seconds, far from any bound a
    loaded machine needs to pass a test that it was delivered."""
    with waiter_timing(refresh=10.0, liveness=30.0):
        yield


def kept_or_lost_never_twice(lease: fencelock.Lease, other: fencelock.Client) -> None:
    """After a failover and a TTL: the lease was either kept (renewed on the new master:
    nobody else gets it until it is released) or reported lost; never held twice, and
    the next holder's token is greater."""
    time.sleep(lease.ttl)  # a TTL: the lease renews against the new master, or is lost
    if lease.lost:
        after = other.lock(lease.name).acquire(timeout=10)
    else:
        with pytest.raises(fencelock.LockTimeout):  # not held twice
            other.lock(lease.name).acquire(timeout=1)
        lease.release()
        after = other.lock(lease.name).acquire(timeout=10)
    assert after.token > lease.token
    after.release()
