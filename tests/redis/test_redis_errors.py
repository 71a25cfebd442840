"""Failures of the redis:// backend: each a fencelock error naming the server, never a hang.

Wrong or missing credentials, ACL users, a closed port, a hung (SIGSTOPped)
server, malformed URL options, and the CLI's one-line report with exit code 69.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis.exceptions

import fencelock
from fencelock import clock
from fencelock.cli import exitcodes
from fencelock.testing import RedisServer, ServerPool, free_port
from tests.polling import wait_until
from tests.redis.conftest import Background, redis_cli

FENCELOCK = str(Path(sys.executable).parent / "fencelock")
PASSWORD = "s3cret-pw"
WRONG = "not-the-pw"  # must never show up in a message
SLACK = 0.8  # scheduling and round-trip allowance on a busy test machine

# redis-py (>= 6) gives every client a default Retry (10 retries with backoff) for
# ConnectionError and TimeoutError; fencelock turns it off (RedisOptions.client_kwargs),
# so a closed port, a hung server or a wrong password fails within the timeout. The
# tests below time that.


# -- credentials -------------------------------------------------------------------


@pytest.fixture(scope="module")
def password_redis(module_servers: ServerPool) -> RedisServer:
    server = module_servers.redis("--requirepass", PASSWORD, name="requirepass")
    assert redis_cli(server.port, "ping", password=PASSWORD) == "PONG", server.log()
    return server


@pytest.fixture(scope="module")
def acl_redis(module_servers: ServerPool) -> RedisServer:
    """``alice`` may do everything, ``bob`` everything but scripts; ``default`` is off."""
    server = module_servers.redis(
        *("--user", "alice", "on", ">secret", "~*", "&*", "+@all"),
        *("--user", "bob", "on", ">pw", "~*", "&*", "+@all", "-@scripting"),
        *("--user", "default", "off"),
        name="acl",
    )
    assert redis_cli(server.port, "ping", user="alice", password="secret") == "PONG", server.log()
    return server


def test_right_password_locks(password_redis: RedisServer, name: str) -> None:
    url = f"redis://:{PASSWORD}@127.0.0.1:{password_redis.port}/0"
    with fencelock.connect(url) as client, client.lock(name, ttl=5) as lease:
        assert lease.token > 0
        info = client.inspect(name)
        assert info is not None
        assert info.owner == lease.owner


def test_wrong_password_is_refused_naming_the_server(password_redis: RedisServer) -> None:
    where = f"127.0.0.1:{password_redis.port}"
    with pytest.raises(fencelock.BackendUnavailable) as caught:
        fencelock.connect(f"redis://:{WRONG}@{where}/0")
    message = str(caught.value)
    assert where in message, message
    assert "refused the credentials" in message, message
    assert WRONG not in message
    assert isinstance(caught.value.__cause__, redis.exceptions.RedisError)  # chained


def test_asyncio_wrong_password_raises_on_first_operation(password_redis: RedisServer) -> None:
    where = f"127.0.0.1:{password_redis.port}"

    async def first_operation() -> BaseException | None:
        client = fencelock.aconnect(f"redis://:{WRONG}@{where}/0")  # no I/O yet
        try:
            await client.lock("creds/async").acquire(timeout=0)
        except fencelock.FencelockError as exc:
            return exc
        finally:
            await client.aclose()
        return None

    error = asyncio.run(first_operation())
    assert isinstance(error, fencelock.BackendUnavailable), repr(error)
    assert where in str(error), str(error)
    assert "refused the credentials" in str(error), str(error)
    assert WRONG not in str(error)


def test_acl_user_locks_with_its_password(acl_redis: RedisServer, name: str) -> None:
    url = f"redis://alice:secret@127.0.0.1:{acl_redis.port}/0"
    with fencelock.connect(url) as client:
        with client.lock(name, ttl=5) as first:
            key = f"fencelock:{{{name}}}"
            assert redis_cli(acl_redis.port, "get", key, user="alice", password="secret") == (
                first.owner
            )
        with client.lock(name, ttl=5) as second:
            assert second.token > first.token


def test_acl_user_with_wrong_password_is_refused(acl_redis: RedisServer) -> None:
    where = f"127.0.0.1:{acl_redis.port}"
    with pytest.raises(fencelock.BackendUnavailable) as caught:
        fencelock.connect(f"redis://alice:{WRONG}@{where}/0")
    message = str(caught.value)
    assert where in message, message
    assert "refused the credentials" in message, message
    assert WRONG not in message


def test_acl_user_without_scripting_gets_a_clear_error(acl_redis: RedisServer) -> None:
    """bob may connect (PING) but not run the acquire script: said, not hidden."""
    where = f"127.0.0.1:{acl_redis.port}"
    with (
        fencelock.connect(f"redis://bob:pw@{where}/0") as client,
        pytest.raises(fencelock.BackendUnavailable) as caught,
    ):
        client.lock("acl/bob").acquire(timeout=0)
    message = str(caught.value)
    assert where in message, message
    assert "no permissions" in message, message


# -- a closed port -------------------------------------------------------------------


@dataclass
class Unreachable:
    port: int
    connect_timeout: float
    attempt: Background[fencelock.Client]


@pytest.fixture(scope="module")
def unreachable() -> Iterator[Unreachable]:
    """connect() to a port nobody listens on, measured once for the tests below."""
    port, connect_timeout = free_port(), 0.5
    url = f"redis://127.0.0.1:{port}/0?connect_timeout={connect_timeout}"
    attempt = Background(lambda: fencelock.connect(url))
    yield Unreachable(port, connect_timeout, attempt)
    attempt.wait(30)
    if attempt.value is not None:
        attempt.value.close()


def test_unreachable_port_is_named(unreachable: Unreachable) -> None:
    assert unreachable.attempt.wait(30), unreachable.attempt.outcome()
    error = unreachable.attempt.error
    assert isinstance(error, fencelock.BackendUnavailable), unreachable.attempt.outcome()
    assert f"cannot reach Redis at 127.0.0.1:{unreachable.port}" in str(error), str(error)


def test_unreachable_port_fails_within_the_connect_timeout(unreachable: Unreachable) -> None:
    assert unreachable.attempt.wait(30), unreachable.attempt.outcome()
    elapsed = unreachable.attempt.elapsed
    assert elapsed is not None, (
        f"connect() to closed port {unreachable.port} with connect_timeout="
        f"{unreachable.connect_timeout} {unreachable.attempt.outcome()}"
    )
    assert elapsed <= unreachable.connect_timeout + SLACK, (
        f"connect() to closed port {unreachable.port} with connect_timeout="
        f"{unreachable.connect_timeout} {unreachable.attempt.outcome()}"
    )


# -- a hung server -------------------------------------------------------------------


@dataclass
class HungAcquire:
    where: str
    timeout: float
    attempt: Background[fencelock.Lease]


@pytest.fixture(scope="module")
def hung_acquire(module_servers: ServerPool) -> Iterator[HungAcquire]:
    """An acquire against a SIGSTOPped server (a lease held), measured once."""
    server = module_servers.redis(name="hung-acquire")
    timeout = 0.2
    client = fencelock.connect(f"{server.url}?timeout={timeout}")
    held = client.lock("hung/held", ttl=30).acquire(timeout=0)
    server.pause()
    try:
        attempt = Background(lambda: client.lock("hung/other", ttl=5).acquire(timeout=0))
        attempt.wait(30)  # however long it takes: the tests judge the outcome
    finally:
        server.resume()
    yield HungAcquire(f"127.0.0.1:{server.port}", timeout, attempt)
    held.release()
    client.close()


def test_hung_server_acquire_raises_backend_unavailable(hung_acquire: HungAcquire) -> None:
    error = hung_acquire.attempt.error
    assert isinstance(error, fencelock.BackendUnavailable), hung_acquire.attempt.outcome()
    assert f"Redis at {hung_acquire.where} did not answer in time" in str(error), str(error)


def test_hung_server_acquire_gives_up_within_about_the_timeout(hung_acquire: HungAcquire) -> None:
    elapsed = hung_acquire.attempt.elapsed
    assert elapsed is not None, (
        f"?timeout={hung_acquire.timeout} but acquire {hung_acquire.attempt.outcome()}"
    )
    assert elapsed <= hung_acquire.timeout + SLACK, (
        f"?timeout={hung_acquire.timeout} but acquire {hung_acquire.attempt.outcome()}"
    )


@dataclass
class Loss:
    lease: fencelock.Lease
    lost: bool  # what lease.lost said, polled until its safe time + SLACK
    noticed_at: float  # clock.now() when polling stopped
    callbacks: list[str]  # thread names the on_lost callback had run on by then
    check_error: BaseException | None


def test_hung_server_asyncio_acquire_gives_up_within_the_timeout(
    module_servers: ServerPool,
) -> None:
    server = module_servers.redis(name="hung-asyncio")
    timeout = 0.2

    async def attempt() -> tuple[BaseException | None, float]:
        async with fencelock.aconnect(f"{server.url}?timeout={timeout}") as client:
            held = await client.lock("hung/held", ttl=30).acquire(timeout=0)  # connected
            server.pause()
            started = clock.now()
            try:
                await client.lock("hung/other", ttl=5).acquire(timeout=0)
            except fencelock.FencelockError as exc:
                return exc, clock.now() - started
            finally:
                server.resume()
                await held.release()
            return None, clock.now() - started

    error, elapsed = asyncio.run(attempt())
    assert isinstance(error, fencelock.BackendUnavailable), error
    assert f"Redis at 127.0.0.1:{server.port} did not answer in time" in str(error), str(error)
    assert elapsed <= timeout + SLACK, f"?timeout={timeout} but gave up after {elapsed:.2f}s"


@dataclass
class HungLeases:
    polled: Loss
    passive_noticed: bool  # its on_lost ran before the safe time + timeout + SLACK
    passive_callbacks: list[str]  # thread names the on_lost callback had run on by then
    log: str


@pytest.fixture(scope="module")
def hung_leases(module_servers: ServerPool) -> Iterator[HungLeases]:
    """Two ttl=1 leases whose renewals fail because the server is SIGSTOPped.

    ``polled`` is watched through ``lease.lost``; ``passive`` only through its
    on_lost callback, so only the renewer can notice its loss.
    """
    server = module_servers.redis(name="hung-leases")
    timeout = 0.2
    client = fencelock.connect(f"{server.url}?timeout={timeout}")
    polled = client.lock("hung/polled", ttl=1).acquire(timeout=0)
    passive = client.lock("hung/passive", ttl=1).acquire(timeout=0)
    polled_calls: list[str] = []
    passive_calls: list[str] = []
    passive_lost = threading.Event()
    polled.on_lost(lambda lease: polled_calls.append(threading.current_thread().name))

    def passive_callback(lease: fencelock.Lease) -> None:
        passive_calls.append(threading.current_thread().name)
        passive_lost.set()

    passive.on_lost(passive_callback)
    # A renewal in flight at the safe time may take one socket timeout to fail.
    passive_deadline = passive.trusted_until + timeout + SLACK
    server.pause()
    try:
        deadline = polled.trusted_until + SLACK
        while not polled.lost and clock.now() < deadline:
            time.sleep(0.005)  # polling lease.lost is what is under test here
        noticed_at = clock.now()
        check_error: BaseException | None = None
        try:
            polled.check()
        except fencelock.FencelockError as exc:
            check_error = exc
        lost = polled.lost
        if lost:  # the renewer may have marked it and not yet run on_lost (outside its lock)
            with contextlib.suppress(AssertionError):
                wait_until(lambda: polled_calls, what="on_lost to run", timeout=SLACK)
        polled_seen = list(polled_calls)  # snapshots: resuming the server changes things
        passive_noticed = passive_lost.wait(max(passive_deadline - clock.now(), 0.0))
        passive_seen = list(passive_calls)
    finally:
        server.resume()
    yield HungLeases(
        Loss(polled, lost, noticed_at, polled_seen, check_error),
        passive_noticed,
        passive_seen,
        server.log(),
    )
    client.close()


def test_lease_with_failing_renewals_is_lost_after_its_safe_time(hung_leases: HungLeases) -> None:
    loss = hung_leases.polled
    assert loss.lost, f"lease.lost still False {SLACK}s after the safe time\n{hung_leases.log}"
    assert loss.noticed_at >= loss.lease.trusted_until  # never before the safe time ends
    assert loss.callbacks, loss.callbacks
    assert len(loss.callbacks) == 1, loss.callbacks
    assert isinstance(loss.check_error, fencelock.LeaseLost), repr(loss.check_error)
    assert "hung/polled" in str(loss.check_error)
    assert loss.lease.remaining() == 0.0


def test_renewer_notices_the_loss_by_itself(hung_leases: HungLeases) -> None:
    """Nobody reads ``lost``: the renewer must mark the lease and run on_lost in time."""
    assert hung_leases.passive_noticed, (
        "on_lost not run by the safe time + one socket timeout + slack: the renewer "
        "thread was blocked in a renew call that redis-py kept retrying"
    )
    assert hung_leases.passive_callbacks == ["fencelock-renewer"]


# -- malformed URLs ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "fragments"),
    [
        (
            "redis://127.0.0.1:1/0?timeout=abc",
            ["option timeout='abc'", "must be a number > 0"],
        ),
        (
            "redis://127.0.0.1:1/0?timeout=0",
            ["option timeout='0'", "must be a number > 0"],
        ),
        (
            "redis://127.0.0.1:1/0?colour=blue",
            ["unknown option 'colour' for redis:// URLs", "timeout", "wait_replicas"],
        ),
        (
            "redis://127.0.0.1:1,127.0.0.1:2/0",
            ["redis:// takes exactly one host, got 2", "redlock://"],
        ),
        (
            "redis://127.0.0.1:1/abc",
            ["Redis database must be a number, got 'abc'"],
        ),
        (
            "redis://127.0.0.1:1/0?wait_replicas=x",
            ["option wait_replicas='x'"],
        ),
        (
            f"redis://:{WRONG}@127.0.0.1:1/0?timeout=abc",
            ["option timeout='abc'", "redis://:***@127.0.0.1:1/0"],
        ),
        (
            "rediss://127.0.0.1:1/0?ssl_cert_reqs=sometimes",
            ["option ssl_cert_reqs='sometimes'", "none, optional or required"],
        ),
        (
            "redlocks://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?ssl_cert_reqs=sometimes",
            ["option ssl_cert_reqs='sometimes'", "none, optional or required"],
        ),
    ],
)
def test_malformed_options_raise_config_error(url: str, fragments: list[str]) -> None:
    for open_client in (fencelock.connect, fencelock.aconnect):
        started = time.monotonic()
        with pytest.raises(fencelock.ConfigError) as caught:
            open_client(url)
        message = str(caught.value)
        for fragment in fragments:
            assert fragment in message, message
        assert WRONG not in message
        assert time.monotonic() - started < 0.5  # decided before any connection attempt


# -- the CLI -------------------------------------------------------------------------


def test_cli_status_on_closed_port_exits_69_with_one_line() -> None:
    port = free_port()
    done = subprocess.run(
        [FENCELOCK, "status", "--url", f"redis://127.0.0.1:{port}/0", "x"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == exitcodes.UNAVAILABLE == 69, done
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("fencelock: "), lines
    assert f"127.0.0.1:{port}" in lines[0], lines
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
