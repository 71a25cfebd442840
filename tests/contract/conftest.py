"""The contract suite runs once per backend URL; later backends join BACKENDS."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import fencelock
from fencelock.testing import RedisServer, ServerPool


@dataclass(frozen=True)
class BackendCase:
    url: str
    cross_process: bool  # leases are shared between processes (not memory://)
    persistent: bool  # tokens survive closing every client (a restart)


def _memory(tmp: Path) -> BackendCase:
    return BackendCase(f"memory://{secrets.token_hex(6)}", cross_process=False, persistent=False)


def _sqlite(tmp: Path) -> BackendCase:
    return BackendCase(f"sqlite:///{tmp / 'locks.db'}", cross_process=True, persistent=True)


def _redis(tmp: Path, servers: Callable[[str], list[str]]) -> BackendCase:
    return BackendCase(servers("redis")[0], cross_process=True, persistent=True)


def _redlock(tmp: Path, servers: Callable[[str], list[str]]) -> BackendCase:
    hosts = ",".join(url.split("//")[1].split("/")[0] for url in servers("redlock"))
    return BackendCase(f"redlock://{hosts}", cross_process=True, persistent=True)


BACKENDS = ["memory", "sqlite", "redis", "redlock"]


@pytest.fixture(scope="session")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], list[str]]]:
    """Starts each kind of server once per session, on first use; URLs by kind."""
    started: dict[str, list[RedisServer]] = {}

    with ServerPool(tmp_path_factory.mktemp) as pool:

        def urls(kind: str) -> list[str]:
            if kind not in started:
                count = 5 if kind == "redlock" else 1
                started[kind] = [pool.redis(name=kind) for _ in range(count)]
            return [p.url for p in started[kind]]

        yield urls


@pytest.fixture(params=BACKENDS)
def backend(
    request: pytest.FixtureRequest, tmp_path: Path, servers: Callable[[str], list[str]]
) -> BackendCase:
    if request.param == "memory":
        return _memory(tmp_path)
    if request.param == "sqlite":
        return _sqlite(tmp_path)
    if request.param == "redlock":
        return _redlock(tmp_path, servers)
    return _redis(tmp_path, servers)


@pytest.fixture
def client(backend: BackendCase) -> Iterator[fencelock.Client]:
    with fencelock.connect(backend.url) as c:
        yield c


@pytest.fixture
def other(backend: BackendCase) -> Iterator[fencelock.Client]:
    """A second, independent client of the same backend."""
    with fencelock.connect(backend.url) as c:
        yield c


@pytest.fixture
def name() -> str:
    return f"t{secrets.token_hex(4)}/lock"  # a namespace of its own per test


def wait_for_waiters(client: fencelock.Client, name: str, count: int = 1) -> None:
    """Return once ``count`` waiters are queued on ``name`` (where the backend counts
    them: all but Redlock, where a short pause stands in)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        info = client.inspect(name)
        if info is not None and info.waiters is None:
            time.sleep(0.2)  # Redlock keeps no queue to look at
            return
        if info is not None and (info.waiters or 0) >= count:
            return
        time.sleep(0.01)
    raise AssertionError(f"{count} waiter(s) never queued on {name!r}")
