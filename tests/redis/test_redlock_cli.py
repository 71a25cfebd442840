"""The ``fencelock`` command on ``redlock://`` with nodes hung or unreachable.

It says one thing, once, with the documented exit code: no asyncio noise when it
exits without closing the client, and no "no locks held" when no node answered.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import fencelock
from fencelock.testing import RedisServer, ServerPool, free_port

FENCELOCK = str(Path(sys.executable).parent / "fencelock")
UNAVAILABLE, NOT_ACQUIRED = 69, 75


def redlock_url(ports: list[int]) -> str:
    return "redlock://" + ",".join(f"127.0.0.1:{p}" for p in ports) + "?timeout=0.2"


def fencelock_cmd(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "FENCELOCK_URL"}
    return subprocess.run(
        [FENCELOCK, *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.fixture
def five(servers: ServerPool) -> list[RedisServer]:
    return [servers.redis(name=f"redlock-c{i}") for i in range(5)]


def test_run_no_wait_with_two_nodes_hung_says_busy_once(five: list[RedisServer], name: str) -> None:
    url = redlock_url([node.port for node in five])
    with fencelock.connect(url) as client, client.lock(name, ttl=30):
        for node in five[3:]:
            node.pause()
        try:
            done = fencelock_cmd("run", "--url", url, "--no-wait", name, "--", "true")
        finally:
            for node in five[3:]:
                node.resume()
    assert done.returncode == NOT_ACQUIRED, done
    assert done.stderr.splitlines() == [
        f"fencelock: lock {name!r} is held by another owner (tried once, no wait)"
    ], done.stderr


@pytest.fixture
def black_holes() -> Iterator[list[int]]:
    """Two ports whose connections never complete (a full accept queue drops the SYN),
    as with a host that is down: the client is still connecting when it gives up."""
    listeners, fillers = [], []
    for _ in range(2):
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        listeners.append(listener)
        for _ in range(3):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(listener.getsockname())
            fillers.append(filler)
    yield [listener.getsockname()[1] for listener in listeners]
    for sock in fillers + listeners:
        sock.close()


def test_run_no_wait_with_two_nodes_not_connecting_says_busy_once(
    five: list[RedisServer], black_holes: list[int], name: str
) -> None:
    """Exiting while connections are still being opened prints no asyncio warning."""
    url = redlock_url([node.port for node in five[:3]] + black_holes)
    with fencelock.connect(url) as client, client.lock(name, ttl=30):
        done = fencelock_cmd("run", "--url", url, "--no-wait", name, "--", "true")
    assert done.returncode == NOT_ACQUIRED, done
    assert done.stderr.splitlines() == [
        f"fencelock: lock {name!r} is held by another owner (tried once, no wait)"
    ], done.stderr


def test_list_with_every_node_unreachable_fails_with_69() -> None:
    ports = [free_port() for _ in range(3)]
    done = fencelock_cmd("list", "--url", redlock_url(ports))
    assert done.returncode == UNAVAILABLE, done
    assert "no locks held" not in done.stdout
    assert "3 of 3 nodes unavailable" in done.stderr, done.stderr
