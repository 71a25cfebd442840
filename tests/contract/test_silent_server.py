"""A server that takes the connection and never answers (a listening socket that accepts
and reads nothing back: no ZooKeeper handshake, no HTTP reply, no PostgreSQL startup).

Connecting fails within the URL's ``connect_timeout``, in sync and async (``aconnect()``,
or a blocking client's first call), with one error naming the server and not the
password; closing a client whose connection never came waits for none of it, and says
nothing on stderr. Measured before: ``aconnect()`` 10 s on etcd (its request timeout)
and 30 s on ZooKeeper (kazoo reads its handshake for the session timeout) whatever
``connect_timeout`` said; a blocking ZooKeeper client's ``close()`` 28 s after an
``acquire(timeout=0)``, with "Task exception was never retrieved" on stderr, and
``fencelock run --wait 1`` 30.5 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import fencelock
from fencelock.engine.timing import REQUEST_BOUND
from tests.contract.conftest import selected

pytestmark = pytest.mark.timeout(120)

KINDS = selected(["etcd", "zookeeper", "postgresql", "advisory"])
CONNECT_TIMEOUT = 1.0
SLACK = 1.5  # a loaded 2-core machine's scheduling, on top of the promised bound
SECRET = "s3cret-pw"


@pytest.fixture
def silent() -> Iterator[str]:
    """``host:port`` of a socket that accepts every connection and never writes a byte."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=64)
    accepted: list[socket.socket] = []

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                accepted.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # ends the accept() under way
        listener.close()
        thread.join(5)
        for conn in accepted:
            conn.close()


def url_of(kind: str, address: str, options: str = f"connect_timeout={CONNECT_TIMEOUT:g}") -> str:
    """A URL of ``kind`` at ``address``, with credentials (the error must hide them)."""
    user = f"fence:{SECRET}@{address}"
    return {
        "etcd": f"etcd://{user}?{options}",
        "zookeeper": f"zookeeper://{user}/silent?{options}",
        "postgresql": f"postgresql://{user}/db?{options}",
        "advisory": f"postgresql+advisory://{user}/db?{options}",
    }[kind]


def assert_clear(error: BaseException, address: str) -> None:
    message = str(error)
    assert address in message, f"the server is not named: {message}"
    assert SECRET not in message, f"the password is shown: {message}"


def timed(call: Callable[[], object]) -> tuple[float, BaseException]:
    started = time.monotonic()
    with pytest.raises(fencelock.BackendUnavailable) as raised:
        call()
    return time.monotonic() - started, raised.value


@pytest.mark.parametrize("kind", KINDS)
def test_aconnect_gives_up_within_the_connect_timeout(kind: str, silent: str) -> None:
    async def enter() -> None:
        async with fencelock.aconnect(url_of(kind, silent)):
            pass

    took, error = timed(lambda: asyncio.run(enter()))
    assert took < CONNECT_TIMEOUT + SLACK, f"aconnect raised after {took:.2f}s"
    assert_clear(error, silent)


@pytest.mark.parametrize("kind", KINDS)
def test_a_blocking_clients_first_call_gives_up_within_the_connect_timeout(
    kind: str, silent: str
) -> None:
    """``connect()`` makes no connection on these schemes (docs/guide.md): the first call
    that needs the server does, an acquire that would wait 30 s included."""
    url = url_of(kind, silent)
    calls: tuple[Callable[[fencelock.Client], object], ...] = (
        lambda client: client.inspect("silent/x"),
        lambda client: client.lock("silent/y").acquire(timeout=30),
    )
    for call in calls:
        started = time.monotonic()
        with fencelock.connect(url) as client:
            took, error = timed(lambda: call(client))  # noqa: B023 - called at once
        closed = time.monotonic() - started
        assert took < CONNECT_TIMEOUT + SLACK, f"raised after {took:.2f}s"
        assert closed < CONNECT_TIMEOUT + SLACK, f"closed {closed:.2f}s after connect()"
        assert_clear(error, silent)


@pytest.mark.parametrize("kind", KINDS)
def test_closing_a_client_whose_connection_never_came_is_prompt(kind: str, silent: str) -> None:
    """The URL's connect timeout (5 s) is still running when ``acquire(timeout=0)`` gives
    up, one request bound later; the close that follows waits for none of it (it took
    28 s on ZooKeeper: kazoo's stop() waited for its handshake's read)."""
    url = url_of(kind, silent, "timeout=2")
    client = fencelock.connect(url)
    timed(lambda: client.lock("silent/a").acquire(timeout=0))
    started = time.monotonic()
    client.close()
    took = time.monotonic() - started
    assert took < 2 + SLACK, f"the blocking close took {took:.2f}s"

    async def in_asyncio() -> float:
        client = fencelock.aconnect(url)
        with pytest.raises(fencelock.BackendUnavailable):
            await client.lock("silent/b").acquire(timeout=0)
        started = time.monotonic()
        await client.aclose()
        return time.monotonic() - started

    took = asyncio.run(in_asyncio())
    assert took < 2 + SLACK, f"the asyncio close took {took:.2f}s"


QUIET_SCRIPT = """
import asyncio, gc, sys, fencelock
url = sys.argv[1]
client = fencelock.connect(url)
try:
    client.lock("silent/c").acquire(timeout=0)
except fencelock.BackendUnavailable:
    pass
client.close()
del client

async def main():
    client = fencelock.aconnect(url)
    try:
        await client.lock("silent/d").acquire(timeout=0)
    except fencelock.BackendUnavailable:
        pass
    await client.aclose()

asyncio.run(main())
gc.collect()
"""


@pytest.mark.parametrize("kind", KINDS)
def test_giving_up_on_a_silent_server_prints_nothing(kind: str, silent: str) -> None:
    """No traceback ("Task exception was never retrieved"), no driver's log line through
    logging's last resort: the caller had its one error, and that is all."""
    url = url_of(kind, silent)
    done = subprocess.run(
        [sys.executable, "-c", QUIET_SCRIPT, url],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


def test_fencelock_run_on_a_silent_zookeeper_exits_soon_after_its_wait(silent: str) -> None:
    """The command's one line, exit 69, right after ``--wait 1`` and one request bound
    (30.5 s before: the exit waited for the session's opening)."""
    fencelock_cli = str(Path(sys.executable).parent / "fencelock")
    url = f"zookeeper://{silent}"
    started = time.monotonic()
    done = subprocess.run(
        [fencelock_cli, "run", "--wait", "1", "--url", url, "silent/run", "--", "true"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    took = time.monotonic() - started
    assert done.returncode == 69, done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    # the command's own start-up included: generous, and still far from the 30.5 s
    assert took < 1 + REQUEST_BOUND + 3 * SLACK + 2, f"exited after {took:.2f}s"
