"""On the backends whose lock ends with its connection, the holder hears of the end at once.

``mysql://`` and ``postgresql+advisory://``: when the server ends the holder's
connection (``KILL``, ``pg_terminate_backend``, a crash) it hands the lock to a waiter
in the same instant. The holder must know within milliseconds, in sync and async, not at
its next renewal: with TTL 60 s that renewal comes 20 s later, so a lease still
believed held after :data:`PROMPTLY` is the bug (measured: docs/backends.md,
``bench/revocation_window.py``).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import fencelock
from fencelock.backends.mysql.statements import lock_name
from fencelock.testing import MariaDBServer, PostgreSQLServer, ServerPool
from fencelock.testing.process import ServerProcess
from tests.sql.test_advisory import advisory, holder_pid

TTL = 60.0  # renewed every 20 s: never what notices here
PROMPTLY = 5.0


@dataclass
class Revocable:
    url: str
    server: ServerProcess
    end_session: Callable[[str], None]  # ends the connection holding lock ``name``


def _postgres(server: PostgreSQLServer) -> Revocable:
    def end(name: str) -> None:
        server.sql("SELECT pg_terminate_backend(%s)", (holder_pid(server, name),))

    return Revocable(advisory(server.url), server, end)


def _mariadb(server: MariaDBServer) -> Revocable:
    def end(name: str) -> None:
        (holder,) = server.sql("SELECT IS_USED_LOCK(%s)", (lock_name("fencelock:", name),))
        server.sql(f"KILL CONNECTION {int(holder[0])}")

    return Revocable(server.url, server, end)


@pytest.fixture(params=["postgresql+advisory", "mysql"])
def revocable(
    request: pytest.FixtureRequest, postgres: PostgreSQLServer, mariadb: MariaDBServer
) -> Revocable:
    return _postgres(postgres) if request.param == "postgresql+advisory" else _mariadb(mariadb)


@pytest.fixture(scope="module", params=["postgresql+advisory", "mysql"])
def crashable(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Revocable]:
    """A server of this module's own: these tests kill it."""
    with ServerPool.under(Path(tmp_path_factory.mktemp("crash"))) as pool:
        if request.param == "mysql":
            yield _mariadb(pool.mariadb(name="mariadb-crash"))
        else:
            yield _postgres(pool.postgresql(name="postgresql-crash"))


def _crash(target: Revocable, _name: str) -> None:
    """SIGKILL the server; the holder's own assertion runs before the restart."""
    target.server.kill()


def _restarted(target: Revocable) -> None:
    if not target.server.alive:
        target.server.start()


def _sync_holder_hears(
    target: Revocable, name: str, fault: Callable[[Revocable, str], None]
) -> None:
    with fencelock.connect(target.url) as client:
        lease = client.lock(name, ttl=TTL).acquire()
        started = time.monotonic()
        fault(target, name)
        assert lease.lost_event.wait(PROMPTLY), "the loss waited for the renewal"
        assert time.monotonic() - started < PROMPTLY
        assert "another owner may hold" in (lease.lost_reason or "")
        _restarted(target)
        with fencelock.connect(target.url) as other:
            successor = other.lock(name).acquire(timeout=30)
            assert successor.token > lease.token
            successor.release()


def _async_holder_hears(
    target: Revocable, name: str, fault: Callable[[Revocable, str], None]
) -> None:
    async def main() -> None:
        async with fencelock.aconnect(target.url) as client:
            lease = await client.lock(name, ttl=TTL).acquire()
            started = time.monotonic()
            await asyncio.to_thread(fault, target, name)
            while not lease.lost:
                assert time.monotonic() - started < PROMPTLY, "the loss waited for the renewal"
                await asyncio.sleep(0.01)
            assert "another owner may hold" in (lease.lost_reason or "")

    try:
        asyncio.run(main())
    finally:
        _restarted(target)


def _end_session(target: Revocable, name: str) -> None:
    target.end_session(name)


def test_a_blocking_holder_hears_its_session_end_at_once(revocable: Revocable, name: str) -> None:
    _sync_holder_hears(revocable, name, _end_session)


def test_an_asyncio_holder_hears_its_session_end_at_once(revocable: Revocable, name: str) -> None:
    _async_holder_hears(revocable, name, _end_session)


def test_a_blocking_holder_hears_a_server_crash_at_once(crashable: Revocable, name: str) -> None:
    _sync_holder_hears(crashable, name, _crash)


def test_an_asyncio_holder_hears_a_server_crash_at_once(crashable: Revocable, name: str) -> None:
    _async_holder_hears(crashable, name, _crash)


def test_a_released_lease_is_not_reported_lost_when_its_connection_ends_later(
    revocable: Revocable, name: str
) -> None:
    """The watch ends with the lease: a connection reused or closed afterwards is none
    of the released lease's business."""
    with fencelock.connect(revocable.url) as client:
        lease = client.lock(name, ttl=TTL).acquire()
        lease.release()
        again = client.lock(name, ttl=TTL).acquire()
        revocable.end_session(name)
        assert again.lost_event.wait(PROMPTLY)
        assert not lease.lost
        assert lease.released


def test_a_forked_child_hears_its_own_session_end_at_once(revocable: Revocable, name: str) -> None:
    """The socket watcher is the parent's (a thread and an epoll set): a child forked while it
    runs gets one of its own with its first lease, and the parent's lease is untouched."""
    with fencelock.connect(revocable.url) as client:
        parents = client.lock(f"{name}/parent", ttl=TTL).acquire()  # the socket watcher runs
        ready_r, ready_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: exit 0 if it hears of its loss at once
            code = 1
            try:
                lease = client.lock(name, ttl=TTL).acquire(timeout=30)
                os.write(ready_w, b"x")
                code = 0 if lease.lost_event.wait(PROMPTLY) else 2
            finally:
                os._exit(code)
        os.close(ready_w)
        try:
            assert os.read(ready_r, 1) == b"x", "the child took no lease"
            revocable.end_session(name)
        finally:
            _, status = os.waitpid(pid, 0)
            os.close(ready_r)
        assert os.waitstatus_to_exitcode(status) == 0, "the child missed its session's end"
        assert not parents.lost
        parents.release()
