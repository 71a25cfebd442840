"""The contract suite runs once per backend URL; later backends join BACKENDS."""

from __future__ import annotations

import asyncio
import gc
import os
import secrets
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

import fencelock
from fencelock.backends.base import LockInfo, sharing
from fencelock.backends.redis.scripts import LockKeys
from fencelock.testing import ServerPool, waiter_timing
from fencelock.testing.redis import SentinelServer
from tests.polling import await_until, wait_until


@dataclass(frozen=True)
class BackendCase:
    url: str
    cross_process: bool  # leases are shared between processes (not memory://)
    persistent: bool  # tokens survive closing every client (a restart)
    records_since: bool = True  # inspect/list say when the lease was taken


# Every server URL lets a request in flight take 5 s past a call's timeout, not the
# default 1 s: the contract is about exclusion and tokens, and a loaded 2-core machine's
# 3-member ZooKeeper ensemble has taken 1.3 s to write one node (a false
# BackendUnavailable in CI). test_hung_server.py holds the default bound to its promise.
PATIENT = "request_bound=5"


def patient(url: str) -> str:
    """``url`` with :data:`PATIENT` among its options."""
    return f"{url}{'&' if '?' in url else '?'}{PATIENT}"


def _memory(tmp: Path) -> BackendCase:
    return BackendCase(f"memory://{secrets.token_hex(6)}", cross_process=False, persistent=False)


def _sqlite(tmp: Path) -> BackendCase:
    url = patient(f"sqlite:///{tmp / 'locks.db'}")
    return BackendCase(url, cross_process=True, persistent=True)


def _redis(tmp: Path, servers: Callable[[str], list[str]]) -> BackendCase:
    return BackendCase(patient(servers("redis")[0]), cross_process=True, persistent=True)


def _redlock(tmp: Path, servers: Callable[[str], list[str]]) -> BackendCase:
    hosts = ",".join(url.split("//")[1].split("/")[0] for url in servers("redlock"))
    # Each node's answer is awaited up to 1 s, not the default 0.1 s: the contract is
    # not about Redlock's timing, and a loaded 2-core machine misses 0.1 s at times.
    return BackendCase(
        f"redlock://{hosts}/0?{PATIENT}&timeout=1",
        cross_process=True,
        persistent=True,
        records_since=False,
    )


def _etcd(tmp: Path, servers: Callable[[str], list[str]]) -> BackendCase:
    url = patient(servers("etcd")[0])
    return BackendCase(url, cross_process=True, persistent=True, records_since=False)


def _zookeeper(tmp: Path, servers: Callable[[str], list[str]]) -> BackendCase:
    return BackendCase(patient(servers("zookeeper")[0]), cross_process=True, persistent=True)


def _postgresql(tmp: Path, servers: Callable[[str], list[str]]) -> BackendCase:
    return BackendCase(patient(servers("postgresql")[0]), cross_process=True, persistent=True)


def _advisory(tmp: Path, servers: Callable[[str], list[str]]) -> BackendCase:
    url = servers("postgresql")[0].replace("postgresql://", "postgresql+advisory://", 1)
    return BackendCase(patient(url), cross_process=True, persistent=True)


def selected(kinds: list[str]) -> list[str]:
    """``kinds``, or those of them $FENCELOCK_TEST_BACKENDS names (comma-separated):
    ``make check`` runs the contract on memory, sqlite and redis only."""
    only = os.environ.get("FENCELOCK_TEST_BACKENDS", "").strip()
    if not only:
        return kinds
    chosen = {kind.strip() for kind in only.split(",")}
    return [kind for kind in kinds if kind in chosen]


BACKENDS = selected(
    [
        "memory",
        "sqlite",
        "redis",
        "redis-unix",
        "redis-sentinel",
        "redis-cluster",
        "redlock",
        "etcd",
        "zookeeper",
        "postgresql",
        "advisory",
        "mysql",
    ]
)

# Contract tests etcd:// does not pass yet (issue 10 is open), each with why.
ETCD_OPEN = {
    "test_a_slow_renewal_landing_after_extend": "inspect() reports etcd's whole-second TTL",
    "test_an_extend_whose_reply_comes_late": "inspect() reports etcd's whole-second TTL",
    "test_async_a_slow_renewal_landing_after_extend": "inspect() reports whole seconds",
    "test_a_silent_waiter_first_in_line_holds_the_others_up_briefly": (
        "a paused or killed waiter's key lives as long as its session (its TTL)"
    ),
    "test_an_expired_lease_passes_over_a_dead_waiter_at_once": (
        "a dead waiter's key lives as long as its session (its TTL)"
    ),
}

# Contract tests zookeeper:// does not pass, each with why.
_BEYOND_SESSION = (
    "cannot: an extend past the lease's session timeout (its first TTL) raises "
    "ConfigError, as a ZooKeeper node cannot move to a longer session"
)
ZOOKEEPER_OPEN = {
    "test_extend_and_release_twice": _BEYOND_SESSION,
    "test_a_slow_renewal_landing_after_extend": _BEYOND_SESSION,
    "test_an_extend_whose_reply_comes_late": _BEYOND_SESSION,
    "test_async_a_slow_renewal_landing_after_extend": _BEYOND_SESSION,
    "test_extend_never_trusts_past_max_hold": _BEYOND_SESSION,
    "test_a_silent_waiter_first_in_line_holds_the_others_up_briefly": (
        "not yet: a paused or killed waiter's node lives as long as its session (its TTL)"
    ),
    "test_an_expired_lease_passes_over_a_dead_waiter_at_once": (
        "not yet: a dead waiter's node lives as long as its session (its TTL)"
    ),
}


def sentinel_url(pool: ServerPool, service: str = "mymaster") -> str:
    """A master, one replica of it and three sentinels watching it: the URL that asks
    the sentinels for the master."""
    master = pool.redis(name=f"{service}-master")
    pool.redis("--replicaof", "127.0.0.1", str(master.port), name=f"{service}-replica")
    sentinels = [
        pool.add(SentinelServer(pool.workdir(f"sentinel{i}"), master.port, service=service))
        for i in range(3)
    ]
    hosts = ",".join(f"127.0.0.1:{sentinel.port}" for sentinel in sentinels)
    return f"redis+sentinel://{hosts}/{service}/0"


@pytest.fixture(scope="session")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], list[str]]]:
    """Starts each kind of server once per session, on first use; URLs by kind."""
    started: dict[str, list[str]] = {}

    with ServerPool(tmp_path_factory.mktemp) as pool:

        def urls(kind: str) -> list[str]:
            if kind == "etcd" and kind not in started:  # a 3-member cluster: one URL
                started[kind] = [pool.etcd(3)[0].url]
            if kind == "zookeeper" and kind not in started:  # a 3-member ensemble
                started[kind] = [pool.zookeeper(3)[0].url]
            if kind == "postgresql" and kind not in started:
                started[kind] = [pool.postgresql().url]
            if kind == "mariadb" and kind not in started:
                started[kind] = [pool.mariadb().url]
            if kind == "redis-sentinel" and kind not in started:  # a master, a replica, 3 sentinels
                started[kind] = [sentinel_url(pool)]
            if kind == "redis-cluster" and kind not in started:  # 3 masters; one URL, one seed
                started[kind] = [f"redis+cluster://{pool.redis_cluster(3)[0].address}"]
            if kind == "redis-unix" and kind not in started:  # a socket, no TCP port
                socket = pool.workdir("socket") / "redis.sock"
                pool.redis("--unixsocket", str(socket), "--unixsocketperm", "700", name=kind)
                started[kind] = [f"redis+unix://{socket}?db=0"]
            if kind not in started:
                count = 5 if kind == "redlock" else 1
                started[kind] = [pool.redis(name=kind).url for _ in range(count)]
            return started[kind]

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
    if request.param == "etcd":
        reason = ETCD_OPEN.get(getattr(request.node, "originalname", ""))
        if reason:
            pytest.skip(f"etcd:// not yet: {reason}")
        return _etcd(tmp_path, servers)
    if request.param == "zookeeper":
        reason = ZOOKEEPER_OPEN.get(getattr(request.node, "originalname", ""))
        if reason:
            pytest.skip(f"zookeeper:// {reason}")
        return _zookeeper(tmp_path, servers)
    if request.param == "postgresql":
        return _postgresql(tmp_path, servers)
    if request.param == "advisory":
        return _advisory(tmp_path, servers)
    if request.param == "mysql":
        return BackendCase(patient(servers("mariadb")[0]), cross_process=True, persistent=True)
    if request.param == "redis-sentinel":
        return BackendCase(
            patient(servers("redis-sentinel")[0]), cross_process=True, persistent=True
        )
    if request.param == "redis-cluster":
        return BackendCase(
            patient(servers("redis-cluster")[0]), cross_process=True, persistent=True
        )
    if request.param == "redis-unix":
        return BackendCase(patient(servers("redis-unix")[0]), cross_process=True, persistent=True)
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


def redlock_watchers(url: str, name: str) -> int:
    """How many of a ``redlock://`` URL's nodes have a waiter of ``name`` subscribed to
    its release channel (Redlock keeps no queue: a waiter's subscription is its sign)."""
    hosts = url.split("//", 1)[1].split("/", 1)[0].split("?", 1)[0].split(",")
    channel = LockKeys.of(name).channel
    watching = 0
    for host in hosts:
        address, port = host.rsplit(":", 1)
        with redis.Redis(host=address, port=int(port), socket_timeout=5) as node:
            watching += any(count > 0 for _, count in node.pubsub_numsub(channel))
    return watching


def _queued(info: LockInfo | None, url: str, name: str) -> int:
    if info is None:
        return 0
    if info.waiters is None:  # Redlock keeps no queue: every node must see the waiter
        hosts = url.split("//", 1)[1].split("/", 1)[0].split(",")
        return int(redlock_watchers(url, name) == len(hosts))
    return info.waiters


def queued_waiters(client: fencelock.Client, name: str) -> int:
    """Waiters queued on ``name``: as ``inspect`` counts them, or for Redlock, which
    keeps no queue, 1 once a waiter is subscribed to the name's releases on every node
    (it is then past its first try, and a release reaches it)."""
    return _queued(client.inspect(name), client.url, name)


def native_shares(client: fencelock.Client) -> bool:
    """Whether the backend queues readers, writers and permits in a line of its own
    (ZooKeeper) instead of the generic gate-and-slot leases."""
    return sharing(client.internals.backend) is not None


def wait_for_queued_entry(client: fencelock.Client, generic_gate: str, line: str) -> None:
    """Return once a waiter of a read-write lock or semaphore is in line: it holds the
    generic recipe's ``generic_gate`` (or bell), or waits in the native ``line``."""
    if native_shares(client):
        wait_for_waiters(client, line)
        return
    wait_until(
        lambda: client.locked(generic_gate), what=f"a holder of {generic_gate!r}", interval=0.01
    )


def wait_for_waiters(client: fencelock.Client, name: str, count: int = 1) -> None:
    """Return once ``count`` waiters are queued on ``name`` (fails after 30 s; Redlock
    shows at most one)."""
    wait_until(
        lambda: queued_waiters(client, name) >= count,
        what=lambda: f"{count} waiter(s) queued on {name!r}: {queued_waiters(client, name)}",
        interval=0.01,
    )


async def await_waiters(client: fencelock.AsyncClient, name: str, count: int = 1) -> None:
    """:func:`wait_for_waiters` for an asyncio client (the loop runs on meanwhile)."""
    seen: list[int] = []

    async def queued_enough() -> bool:
        info = await client.inspect(name)
        seen.append(await asyncio.to_thread(_queued, info, client.url, name))
        return seen[-1] >= count

    await await_until(
        queued_enough,
        what=lambda: f"{count} waiter(s) queued on {name!r}: {seen[-1]}",
        interval=0.01,
    )


@pytest.fixture
def slow_waiter_expiry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Queued waiters in this process refresh every 10 s and expire after 30 s of
    silence (not 1 s and 3 s): a waiter left in a queue by mistake then holds the next
    caller up for far longer than any bound a loaded machine needs."""
    with waiter_timing(refresh=10.0, liveness=30.0):
        yield


def left_to_the_garbage_collector() -> list[str]:
    """What a collection now finds unclosed: ResourceWarnings and errors raised in
    finalizers (a socket closed after its loop ended), said as text."""
    found: list[str] = []
    hook = sys.unraisablehook
    sys.unraisablehook = lambda raised: found.append(f"{raised.object!r}: {raised.exc_value!r}")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            gc.collect()
    finally:
        sys.unraisablehook = hook
    return found + [str(warning.message) for warning in caught]
