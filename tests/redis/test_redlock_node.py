"""``redlock://`` on its own pipelined connections: failures named, never a hang, no leftovers.

Wrong and right passwords, a database other than 0, scripts flushed from under a
connected client (NOSCRIPT), connections killed by the server, closed ports, hung
(SIGSTOPped) nodes, a failed try that must leave no key behind on a slow node, and
closing without leaked sockets or tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import re
import socket

import pytest

import fencelock
from fencelock import clock
from fencelock.testing import RedisServer, ServerPool, TLSFiles, free_port
from tests.polling import wait_until
from tests.redis import test_redis_tls
from tests.redis.conftest import Background, redis_cli

PASSWORD = "s3cret-pw"
WRONG = "not-the-pw"
SLACK = 0.8  # scheduling allowance on a busy test machine
TIMEOUT = 0.2  # per-node timeout of these tests' clients


def redlock_url(ports: list[int], credentials: str = "", db: int = 0, **options: object) -> str:
    hosts = ",".join(f"127.0.0.1:{port}" for port in ports)
    query = "&".join(f"{k}={v}" for k, v in {"timeout": TIMEOUT, **options}.items())
    return f"redlock://{credentials}{hosts}/{db}?{query}"


@pytest.fixture(scope="module")
def five(module_servers: ServerPool) -> list[RedisServer]:
    """Five plain nodes for the tests that neither pause nor kill them."""
    return [module_servers.redis(name=f"redlock{i}") for i in range(5)]


@pytest.fixture
def five_ports(five: list[RedisServer]) -> list[int]:
    return [server.port for server in five]


def test_locks_in_the_database_of_the_url(five_ports: list[int], name: str) -> None:
    # Every node answers within 5 s, so none gives up its part; the acquire returns at a
    # quorum, and the other nodes' keys land soon after.
    url = redlock_url(five_ports, db=3, timeout=5)
    with fencelock.connect(url) as client, client.lock(name) as lease:
        key = f"fencelock:{{{name}}}"

        def holds_the_lease(port: int) -> bool:
            return redis_cli(port, "-n", "3", "get", key) == lease.owner

        for port in five_ports:
            wait_until(
                functools.partial(holds_the_lease, port),
                timeout=10,
                what=f"the lease in db 3 of node {port}",
            )
            assert redis_cli(port, "-n", "0", "exists", key) == "0"


def test_scripts_flushed_while_connected_are_loaded_again(five_ports: list[int], name: str) -> None:
    with fencelock.connect(redlock_url(five_ports)) as client:
        first = client.lock(name).acquire(timeout=0)
        for port in five_ports:
            assert redis_cli(port, "script", "flush") == "OK"
        first.release()  # NOSCRIPT on every node: loaded and sent again
        for port in five_ports:
            assert redis_cli(port, "script", "flush") == "OK"
        second = client.lock(name).acquire(timeout=0)
        second.release()
        assert second.token > first.token


def test_connections_killed_by_the_servers_are_made_again(five_ports: list[int], name: str) -> None:
    with fencelock.connect(redlock_url(five_ports)) as client:
        client.lock(name).acquire(timeout=0).release()
        for port in five_ports:
            redis_cli(port, "client", "kill", "type", "normal")
        with client.lock(name, timeout=2) as lease:
            assert lease.token > 0


def test_a_failed_try_leaves_no_key_on_a_slow_node(five: list[RedisServer], name: str) -> None:
    """Three nodes busy decide the try at once; the slow node's late win is undone."""
    key = f"fencelock:{{{name}}}"
    for server in five[:3]:
        assert redis_cli(server.port, "set", key, "someone-else", "px", "5000") == "OK"
    slow = five[4]
    sleeper = Background(lambda: redis_cli(slow.port, "debug", "sleep", "0.1"))
    try:
        with fencelock.connect(redlock_url([s.port for s in five], timeout=1)) as client:
            with pytest.raises(fencelock.LockTimeout):
                client.lock(name).acquire(timeout=0)
            assert sleeper.wait(5), sleeper.outcome()
            wait_until(
                lambda: redis_cli(slow.port, "exists", key) == "0",
                timeout=2,
                what=lambda: f"the key gone from the slow node: {redis_cli(slow.port, 'get', key)}",
            )
    finally:
        for server in five:
            redis_cli(server.port, "del", key)


# -- credentials -------------------------------------------------------------------


@pytest.fixture(scope="module")
def protected(module_servers: ServerPool) -> list[int]:
    servers = [
        module_servers.redis("--requirepass", PASSWORD, name=f"redlock-pw{i}") for i in range(3)
    ]
    return [server.port for server in servers]


def test_right_password_locks(protected: list[int], name: str) -> None:
    url = redlock_url(protected, credentials=f":{PASSWORD}@")
    with fencelock.connect(url) as client, client.lock(name) as lease:
        assert lease.token > 0


def test_wrong_password_is_refused_naming_the_nodes(protected: list[int]) -> None:
    url = redlock_url(protected, credentials=f":{WRONG}@")
    with fencelock.connect(url) as client, pytest.raises(fencelock.BackendUnavailable) as caught:
        client.lock("creds/wrong").acquire(timeout=0)
    message = str(caught.value)
    assert "nodes unavailable" in message, message
    assert "refused the credentials" in message, message
    named = [port for port in protected if f"Redis at 127.0.0.1:{port}" in message]
    assert len(named) >= 2, message  # decided once a quorum became impossible
    assert WRONG not in message


def test_missing_password_is_refused(protected: list[int]) -> None:
    with (
        fencelock.connect(redlock_url(protected)) as client,
        pytest.raises(fencelock.BackendUnavailable, match="requires authentication"),
    ):
        client.lock("creds/none").acquire(timeout=0)


def test_nodes_at_their_client_limit_say_so(module_servers: ServerPool) -> None:
    """A full server answers a new connection with an error and closes it: the error
    reaches the user, not just "connection closed"."""
    full = [module_servers.redis(name=f"redlock-full{i}") for i in range(3)]
    for server in full:
        assert server.cli("config", "set", "maxclients", "1") == "OK"
    occupants = [socket.create_connection(("127.0.0.1", server.port)) for server in full]
    try:
        for occupant in occupants:  # answered: the server has counted it
            occupant.sendall(b"PING\r\n")
            assert occupant.recv(100) == b"+PONG\r\n"
        with (
            fencelock.connect(redlock_url([server.port for server in full])) as client,
            pytest.raises(fencelock.BackendUnavailable) as caught,
        ):
            client.lock("full/all").acquire(timeout=0)
    finally:
        for occupant in occupants:
            occupant.close()
    assert "max number of clients reached" in str(caught.value), str(caught.value)


# -- nodes down or hung ---------------------------------------------------------------


def test_closed_ports_fail_fast_naming_every_node() -> None:
    ports = [free_port() for _ in range(3)]
    started = clock.now()
    with (
        fencelock.connect(redlock_url(ports)) as client,
        pytest.raises(fencelock.BackendUnavailable) as caught,
    ):
        client.lock("down/all").acquire(timeout=0)
    assert clock.now() - started < TIMEOUT + SLACK
    message = str(caught.value)
    assert "of 3 nodes unavailable, no quorum of 2 possible" in message, message
    named = [port for port in ports if f"cannot reach Redis at 127.0.0.1:{port}" in message]
    assert len(named) >= 2, message


@pytest.fixture
def fresh_five(servers: ServerPool) -> list[RedisServer]:
    """Five nodes of one test: it may pause or kill them."""
    return [servers.redis(name=f"redlock-f{i}") for i in range(5)]


def test_a_hung_and_a_dead_node_cost_no_more_than_the_timeout(
    fresh_five: list[RedisServer], name: str
) -> None:
    # A 2 s per-node timeout: a step that waited for the hung node, rather than ending
    # at the quorum of healthy ones, would take it whole; a loaded machine has 1.5 s.
    url = redlock_url([s.port for s in fresh_five], timeout=2)
    with fencelock.connect(url) as client:
        fresh_five[3].pause()
        fresh_five[4].kill()
        try:
            for _ in range(20):
                started = clock.now()
                with client.lock(name, timeout=5) as lease:
                    assert lease.token > 0
                assert clock.now() - started < 1.5
        finally:
            fresh_five[3].resume()


def test_a_hung_quorum_raises_within_about_the_timeout(fresh_five: list[RedisServer]) -> None:
    with fencelock.connect(redlock_url([s.port for s in fresh_five], timeout=1)) as client:
        for server in fresh_five[:3]:
            server.pause()
        try:
            attempt = Background(lambda: client.lock("hung/quorum").acquire(timeout=0))
            assert attempt.wait(10), attempt.outcome()
        finally:
            for server in fresh_five[:3]:
                server.resume()
    assert isinstance(attempt.error, fencelock.BackendUnavailable), attempt.outcome()
    # Redlock's node timeout and the request bound are both 1 s: either may say so (the
    # call's time left, when it says so, may be a few ms short of 1 s on a loaded machine)
    said = re.search(r"did not answer (?:a try )?within ([0-9.]+)s", str(attempt.error))
    assert said is not None, attempt.error
    assert 0.9 <= float(said[1]) <= 1.0, attempt.error
    # one timeout, with 1.5 s for a loaded machine: not a wait per step or per node
    assert attempt.elapsed is not None, attempt.outcome()
    assert attempt.elapsed < 2.5, attempt.outcome()


def test_a_node_back_from_the_dead_is_used_again(fresh_five: list[RedisServer], name: str) -> None:
    key = f"fencelock:{{{name}}}"
    dead = fresh_five[0]
    # 1 s per node, not the default 0.2 s: a loaded machine once let all five connects
    # after the kill miss 0.2 s at once; the test is about the node coming back
    url = redlock_url([s.port for s in fresh_five], timeout=1)
    with fencelock.connect(url) as client:
        dead.kill()
        client.lock(name).acquire(timeout=1).release()
        dead.start()

        def holds_key_there() -> bool:
            with client.lock(name, timeout=1) as lease:
                return redis_cli(dead.port, "get", key) == lease.owner

        wait_until(holds_key_there, timeout=5, what="the key on the restarted node")


# -- closing --------------------------------------------------------------------------


def _open_sockets() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # closed meanwhile
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
    return count


def test_closing_leaves_no_sockets_or_tasks(five_ports: list[int], name: str) -> None:
    async def cycles() -> set[asyncio.Task[object]]:
        async with fencelock.aconnect(redlock_url(five_ports)) as client:
            for _ in range(50):
                lease = await client.lock(name).acquire(timeout=1)
                await lease.release()
        await asyncio.sleep(0)
        return {t for t in asyncio.all_tasks() if t is not asyncio.current_task()}

    before = _open_sockets()
    assert asyncio.run(cycles()) == set()
    assert _open_sockets() <= before


# -- TLS --------------------------------------------------------------------------------


shared_certs = test_redis_tls.certs  # the module's fixture ``certs``, used here too
# A TLS handshake on a loaded 2-core machine can take far longer than a plain command.
TLS_TIMEOUT = 3


@pytest.fixture(scope="module")
def tls_nodes(module_servers: ServerPool, shared_certs: TLSFiles) -> list[RedisServer]:
    return [module_servers.redis(tls=shared_certs, name=f"redlock-tls{i}") for i in range(3)]


def test_tls_nodes_with_the_ca_lock(tls_nodes: list[RedisServer], name: str) -> None:
    ports = [node.port for node in tls_nodes]
    assert tls_nodes[0].tls is not None
    url = redlock_url(ports, ssl_ca_certs=tls_nodes[0].tls.ca, timeout=TLS_TIMEOUT)
    url = url.replace("redlock:", "redlocks:")

    async def twice() -> tuple[int, int]:
        async with fencelock.aconnect(url) as client:
            async with client.lock(name) as first:
                pass
            async with client.lock(name) as second:
                return first.token, second.token

    first, second = asyncio.run(twice())
    assert 0 < first < second


def test_tls_nodes_without_the_ca_fail_verification(tls_nodes: list[RedisServer]) -> None:
    url = redlock_url([node.port for node in tls_nodes], timeout=TLS_TIMEOUT)
    url = url.replace("redlock:", "redlocks:")
    with (
        fencelock.connect(url) as client,
        pytest.raises(fencelock.BackendUnavailable) as caught,
    ):
        client.lock("tls/no-ca").acquire(timeout=0)
    assert "certificate verify failed" in str(caught.value), str(caught.value)


def test_plain_client_to_tls_nodes_fails_clearly(tls_nodes: list[RedisServer]) -> None:
    ports = [node.port for node in tls_nodes]
    with fencelock.connect(redlock_url(ports)) as client:
        attempt = Background(lambda: client.lock("tls/plain").acquire(timeout=0))
        assert attempt.wait(10), attempt.outcome()
    assert isinstance(attempt.error, fencelock.BackendUnavailable), attempt.outcome()
    assert any(f"Redis at 127.0.0.1:{port}" in str(attempt.error) for port in ports)


# -- fork ---------------------------------------------------------------------------------


def test_a_forked_child_does_not_share_its_parents_loop_or_connections(
    five_ports: list[int], name: str
) -> None:
    """The child runs its own loop on its own sockets: no reply of one read by the other."""
    with fencelock.connect(redlock_url(five_ports, timeout=1)) as client:
        client.lock(name + "/parent").acquire(timeout=0).release()  # opens the connections
        pid = os.fork()
        if pid == 0:  # the child: the same client object, another lock
            code = 0
            try:
                for _ in range(300):
                    client.lock(name + "/child").acquire(timeout=1).release()
            except BaseException:
                code = 1
            os._exit(code)
        tokens = []
        for _ in range(300):
            lease = client.lock(name + "/parent").acquire(timeout=1)
            tokens.append(lease.token)
            lease.release()
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child's locks failed"
    assert tokens == sorted(set(tokens)), "the parent read replies meant for the child"


def test_a_closed_client_says_so(five_ports: list[int], name: str) -> None:
    """Not a raw ``RuntimeError: Event loop is closed`` from the sync face's loop."""
    client = fencelock.connect(redlock_url(five_ports))
    lease = client.lock(name).acquire(timeout=0)
    client.close()  # releases the forgotten lease first
    with pytest.raises(fencelock.FencelockError, match="closed"):
        client.lock(name + "/other").acquire(timeout=0)
    with pytest.raises(fencelock.FencelockError, match="closed"):
        client.inspect(name)
    assert lease.released
    lease.release()  # a no-op, not a call on the closed loop
    for port in five_ports:
        assert redis_cli(port, "exists", f"fencelock:{{{name}}}") == "0"
