"""fencelock's Redis backends side by side with peer Redis locks.

Run with ``make bench`` or ``.venv/bin/python bench/redis_bench.py`` (``--quick`` for a
smoke run). It starts its own redis-server processes on free loopback ports (one for
``redis://``, five for ``redlock://``) and stops them at the end. Five measurements:

1. **Uncontended** acquire+release cycles/s on one Redis, in one process: fencelock
   sync and asyncio (``ttl=30, renew=True``), redis-py's Lock (sync and asyncio),
   python-redis-lock, and two raw redis-py loops: ``SET NX PX`` + an EVALSHA
   compare-and-delete, and fencelock's own two Lua scripts with no library around them.
2. **Contended**: N processes loop acquire -> hold -> release on one name. Critical
   sections/s, handoff latency (release call start -> next holder's acquire return, both
   read from :func:`fencelock.clock.now`, one clock for every process), fairness and the
   worst acquire wait.
3. **Redlock, 5 nodes up**: cycles/s of fencelock (with fencing tokens), aioredlock,
   redlock-py and pottery, each row in its own process.
4. **Redlock, 1 node hung (SIGSTOP) + 1 killed** while the client runs: the same rows,
   with latency, and thread and socket counts before and after. A row whose call does
   not return is killed at a hard deadline and reported as hung.
5. **Many names contended**, in one process: 20 names, 400 acquisitions (asyncio: 20
   tasks per name; sync: 4 threads per name, 5 each), 10 ms holds, ``ttl=5``, on
   ``redis://`` and ``redlock://``. Total time and the acquire waits: a waiter whose
   wake-up is lost waits the holder's TTL.

It prints tables (rich) and writes ``bench/results/redis-<timestamp>.json``. It installs
nothing: a peer library missing from the venv is reported and its rows are skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import importlib.metadata
import inspect
import json
import logging
import math
import multiprocessing as mp
import os
import platform
import secrets
import signal
import statistics
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnProcess
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

import redis
import redis.asyncio
from harness import (
    ACQUIRE_TIMEOUT,
    READY_TIMEOUT,
    RESULTS_DIR,
    Locker,
    Summary,
    WorkerReport,
    clean_json,
    fmt_ms,
    fmt_number,
    new_table,
    run_contended,
    run_for,
    summarise,
    summary_ms,
    table_markdown,
)
from redis.backoff import NoBackoff
from redis.retry import Retry
from rich.console import Console
from rich.table import Table

import fencelock
from fencelock import clock
from fencelock.backends.redis.scripts import LockKeys, lua
from fencelock.testing import RedisServer, ServerPool

TTL = 30.0
TTL_MS = int(TTL * 1000)
REDLOCK_ACQUIRE_TIMEOUT = 2.0  # how long one Redlock acquire may wait (scenarios 3-4)
NODE_TIMEOUT = 0.1  # fencelock's per-node Redlock timeout, and the tuned peers' socket timeout
GRACE = 2.0  # a Redlock row still inside a call this long after its end is killed
CLOSE_GRACE = 2.0  # how long a finished Redlock row may take to close its client
PROGRESS_EVERY = 0.25  # Redlock rows report progress this often (survives a kill)
BATCH = 20  # uncontended cycles between two clock reads
MAX_UNCONTENDED_CYCLES = 2_000_000
MAX_REDLOCK_CALLS = 500_000
NODES = 5
NOISY_ROUNDS = 1.25  # rounds of one row further apart than this (max / min) get a warning
HUNG, KILLED = 3, 4  # which Redlock nodes scenario 4 stops and kills
INSTALL_HINT = ".venv/bin/pip install -e '.[bench]'"
REPO_ROOT = Path(__file__).resolve().parent.parent
# the usual compare-and-delete (redis-py's own Lock releases with the same script)
CAD_LUA = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"
)
# distribution name -> module name of each peer library
PEERS = {
    "redis": "redis",
    "python-redis-lock": "redis_lock",
    "pottery": "pottery",
    "redlock-py": "redlock",
    "aioredlock": "aioredlock",
}

Address = tuple[str, int]
SyncCycle = Callable[[], int]  # one acquire+release; returns the fencing token, or -1
AsyncCycle = Callable[[], Awaitable[int]]
AsyncClose = Callable[[], Awaitable[Any]]


class NotAcquired(Exception):
    """A peer's acquire call returned False instead of raising."""


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class Settings:
    rounds: int
    round_seconds: float
    workers: int
    contended_seconds: float
    hold: float
    redlock_rounds: int  # scenario 3: interleaved rounds of redlock_seconds / redlock_rounds
    redlock_seconds: float  # timed seconds per Redlock row (scenario 4: one round)
    scenarios: tuple[int, ...]

    @classmethod
    def from_args(cls, argv: Sequence[str] | None) -> Settings:
        parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
        parser.add_argument("--quick", action="store_true", help="short smoke run (~50 s)")
        parser.add_argument("--workers", type=int, default=8, help="contending processes")
        parser.add_argument("--seconds", type=float, default=5.0, help="contended run length")
        parser.add_argument("--hold-ms", type=float, default=1.0, help="critical section length")
        parser.add_argument(
            "--redlock-seconds", type=float, default=3.0, help="run length of a Redlock row"
        )
        parser.add_argument(
            "--only", default="1,2,3,4,5", help="scenarios to run, e.g. --only 3,4 (default all)"
        )
        args = parser.parse_args(argv)
        try:
            scenarios = tuple(sorted({int(s) for s in args.only.split(",") if s.strip()}))
        except ValueError:
            parser.error("--only takes scenario numbers 1-5, e.g. --only 1,3")
        if not scenarios or not set(scenarios) <= {1, 2, 3, 4, 5}:
            parser.error("--only takes scenario numbers 1-5, e.g. --only 1,3")
        if args.workers < 2 or args.seconds <= 0 or args.hold_ms < 0 or args.redlock_seconds <= 0:
            parser.error(
                "need --workers >= 2, --seconds > 0, --hold-ms >= 0, --redlock-seconds > 0"
            )
        hold = args.hold_ms / 1000
        if args.quick:
            return cls(1, 0.4, args.workers, 1.5, hold, 1, 1.0, scenarios)
        return cls(5, 0.6, args.workers, args.seconds, hold, 3, args.redlock_seconds, scenarios)


def peer_versions() -> dict[str, str | None]:
    """Each peer's installed version, or None (after saying why) if it cannot be imported."""
    found: dict[str, str | None] = {}
    for dist, module in PEERS.items():
        try:
            importlib.import_module(module)
        except Exception as exc:  # an import can fail in other ways than ImportError
            print(
                f"note: {dist} ({module!r}) cannot be imported, so its rows are skipped: "
                f"{type(exc).__name__}: {exc} (install the bench extra: {INSTALL_HINT})",
                file=sys.stderr,
            )
            found[dist] = None
            continue
        try:
            found[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            found[dist] = "unknown"
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        found["hiredis"] = importlib.metadata.version("hiredis")  # redis-py parses with it
    return found


def quiet_peer_logs() -> None:
    """Peers log every node error with a traceback (pottery, redlock-py); errors are counted
    in the tables instead, so nothing is printed (a handler on the root logger stops
    Python's last-resort printing to stderr)."""
    logging.getLogger().addHandler(logging.NullHandler())


def fair_supported() -> bool:
    """True if this fencelock's ``Client.lock`` takes a ``fair`` keyword."""
    return "fair" in inspect.signature(fencelock.Client.lock).parameters


def redis_url(address: Address) -> str:
    return f"redis://{address[0]}:{address[1]}/0"


def redlock_url(nodes: Sequence[Address]) -> str:
    hosts = ",".join(f"{host}:{port}" for host, port in nodes)
    return f"redlock://{hosts}?timeout={NODE_TIMEOUT:g}"


def redis_py_default_sleep() -> float:
    """redis-py Lock's polling interval, read from its signature rather than assumed."""
    from redis.lock import Lock

    return float(inspect.signature(Lock.__init__).parameters["sleep"].default)


# --------------------------------------------------------------------------- servers


class Fleet:
    """The redis-servers of this run: one for ``redis://`` and five Redlock nodes.

    They come from :mod:`fencelock.testing` (free loopback ports, no persistence, a
    directory and a log each under ``workdir``). :meth:`fault` stops one node
    (SIGSTOP) and kills another; :meth:`heal` restarts both, empty, on their ports.
    """

    def __init__(self, workdir: Path) -> None:
        self.pool = ServerPool.under(workdir)
        self.single: RedisServer | None = None
        self.nodes: list[RedisServer] = []

    def start(self, nodes: int) -> None:
        self.single = self.pool.redis(name="single")
        self.nodes = [self.pool.redis(name=f"node{i}") for i in range(nodes)]

    @property
    def single_address(self) -> Address:
        assert self.single is not None
        return ("127.0.0.1", self.single.port)

    @property
    def node_addresses(self) -> list[Address]:
        return [("127.0.0.1", node.port) for node in self.nodes]

    def fault(self) -> None:
        self.nodes[HUNG].pause()
        self.nodes[KILLED].kill()

    def heal(self) -> None:
        for i in (HUNG, KILLED):
            self.nodes[i].stop()
            self.nodes[i].start()

    def stop(self) -> None:
        self.pool.stop_all()


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (Linux ``/proc``); nan elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return math.nan
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def redis_requests(address: Address) -> int:
    """Client requests the server has read so far (``total_reads_processed``).

    One read event per request, or per pipeline: round trips, not commands, so the
    commands a Lua script runs inside Redis do not count.
    """
    with redis.Redis(host=address[0], port=address[1], decode_responses=True) as client:
        stats: dict[str, Any] = client.info("stats")
    return int(stats["total_reads_processed"])


def open_sockets(exclude: int | None = None) -> int:
    """Sockets this process has open (Linux ``/proc/self/fd``); -1 where unknown."""
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return -1
    count = 0
    for fd in fds:
        if exclude is not None and fd == str(exclude):
            continue
        with contextlib.suppress(OSError):
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
    return count


# --------------------------------------------------------------------------- 1. uncontended


class Runner(Protocol):
    def run_for(self, seconds: float) -> tuple[int, float]: ...

    def close(self) -> None: ...


async def arun_for(cycle: AsyncCycle, seconds: float) -> tuple[int, float]:
    """:func:`run_for` for a coroutine function."""
    done = 0
    start = clock.now()
    deadline = start + seconds
    now = start
    while done < MAX_UNCONTENDED_CYCLES:
        for _ in range(BATCH):
            await cycle()
        done += BATCH
        now = clock.now()
        if now >= deadline:
            break
    return done, now - start


class SyncRunner:
    def __init__(self, cycle: SyncCycle, closer: Callable[[], Any]) -> None:
        self._cycle, self._closer = cycle, closer

    def run_for(self, seconds: float) -> tuple[int, float]:
        return run_for(self._cycle, seconds, BATCH, MAX_UNCONTENDED_CYCLES)

    def close(self) -> None:
        self._closer()


class AsyncRunner:
    """An asyncio contender on an event loop of its own, kept for every round."""

    def __init__(self, setup: Callable[[], Coroutine[Any, Any, tuple[AsyncCycle, AsyncClose]]]):
        self._loop = asyncio.new_event_loop()
        try:
            self._cycle, self._closer = self._loop.run_until_complete(setup())
        except BaseException:
            self._loop.close()
            raise

    def run_for(self, seconds: float) -> tuple[int, float]:
        return self._loop.run_until_complete(arun_for(self._cycle, seconds))

    def close(self) -> None:
        try:
            self._loop.run_until_complete(self._closer())
        finally:
            self._loop.close()


def open_fencelock(address: Address, name: str) -> Runner:
    client = fencelock.connect(redis_url(address))
    lock = client.lock(name, ttl=TTL, renew=True)

    def cycle() -> int:
        lease = lock.acquire(timeout=ACQUIRE_TIMEOUT)
        lease.release()
        return lease.token

    return SyncRunner(cycle, client.close)


def open_fencelock_async(address: Address, name: str) -> Runner:
    async def setup() -> tuple[AsyncCycle, AsyncClose]:
        client = fencelock.aconnect(redis_url(address))
        lock = client.lock(name, ttl=TTL, renew=True)

        async def cycle() -> int:
            lease = await lock.acquire(timeout=ACQUIRE_TIMEOUT)
            await lease.release()
            return lease.token

        return cycle, client.aclose

    return AsyncRunner(setup)


def open_redis_py(address: Address, name: str) -> Runner:
    client = redis.Redis(host=address[0], port=address[1])
    lock = client.lock(name, timeout=TTL)

    def cycle() -> int:
        if not lock.acquire(blocking_timeout=ACQUIRE_TIMEOUT):
            raise NotAcquired(f"redis-py Lock {name!r} not acquired")
        lock.release()
        return -1

    return SyncRunner(cycle, client.close)


def open_redis_py_async(address: Address, name: str) -> Runner:
    async def setup() -> tuple[AsyncCycle, AsyncClose]:
        client = redis.asyncio.Redis(host=address[0], port=address[1])
        lock = client.lock(name, timeout=TTL)

        async def cycle() -> int:
            if not await lock.acquire(blocking_timeout=ACQUIRE_TIMEOUT):
                raise NotAcquired(f"redis.asyncio Lock {name!r} not acquired")
            await lock.release()
            return -1

        return cycle, client.aclose

    return AsyncRunner(setup)


def _open_python_redis_lock(address: Address, name: str, auto_renewal: bool) -> Runner:
    redis_lock: Any = importlib.import_module("redis_lock")
    client = redis.Redis(host=address[0], port=address[1])
    lock = redis_lock.Lock(client, name, expire=int(TTL), auto_renewal=auto_renewal)

    def cycle() -> int:
        if not lock.acquire(timeout=int(ACQUIRE_TIMEOUT)):
            raise NotAcquired(f"python-redis-lock {name!r} not acquired")
        lock.release()
        return -1

    return SyncRunner(cycle, client.close)


def open_python_redis_lock(address: Address, name: str) -> Runner:
    return _open_python_redis_lock(address, name, auto_renewal=False)


def open_python_redis_lock_renewing(address: Address, name: str) -> Runner:
    return _open_python_redis_lock(address, name, auto_renewal=True)


def open_raw_set_nx(address: Address, name: str) -> Runner:
    """The least a Redis lease needs: SET NX PX with a fresh value, then compare-and-delete."""
    client = redis.Redis(host=address[0], port=address[1])
    free = client.register_script(CAD_LUA)

    def cycle() -> int:
        value = secrets.token_hex(16)
        if not client.set(name, value, nx=True, px=TTL_MS):
            raise NotAcquired(f"raw loop found {name!r} still held")
        free(keys=[name], args=[value])
        return -1

    return SyncRunner(cycle, client.close)


def open_raw_fencelock_lua(address: Address, name: str) -> Runner:
    """fencelock's wire protocol with nothing around it: its acquire.lua and free.lua."""
    client = redis.Redis(host=address[0], port=address[1], decode_responses=True)
    take = client.register_script(lua("acquire"))
    free = client.register_script(lua("free"))
    keys = LockKeys.of(name)

    def cycle() -> int:
        owner = secrets.token_hex(20)
        reply = take(keys=keys.queued, args=[TTL_MS, "bench:wake", 20_000, 1000, owner])
        if int(reply[0]) != 1:
            raise NotAcquired(f"raw fencelock Lua found {name!r} still held")
        free(keys=keys.waking, args=["release", owner])
        return int(reply[1])

    return SyncRunner(cycle, client.close)


@dataclass(frozen=True)
class Uncontended:
    key: str
    label: str
    api: str  # "sync" or "asyncio": fencelock of the same API is the ratio's numerator
    peer: str | None  # the peer distribution it needs, if any
    opener: Callable[[Address, str], Runner]


UNCONTENDED = [
    Uncontended("fencelock", "fencelock redis:// (ttl=30, renew)", "sync", None,
                open_fencelock),
    Uncontended("fencelock-async", "fencelock redis:// asyncio (ttl=30, renew)", "asyncio", None,
                open_fencelock_async),
    Uncontended("redis-py", "redis-py Lock (timeout=30)", "sync", "redis", open_redis_py),
    Uncontended("redis-py-async", "redis.asyncio Lock (timeout=30)", "asyncio", "redis",
                open_redis_py_async),
    Uncontended("python-redis-lock", "python-redis-lock (expire=30)", "sync",
                "python-redis-lock", open_python_redis_lock),
    Uncontended("python-redis-lock-renew", "python-redis-lock (expire=30, auto_renewal)", "sync",
                "python-redis-lock", open_python_redis_lock_renewing),
    Uncontended("raw-set-nx", "raw redis-py: SET NX PX + EVALSHA CAD", "sync", "redis",
                open_raw_set_nx),
    Uncontended("raw-fencelock-lua", "raw redis-py: fencelock's acquire.lua + free.lua",
                "sync", "redis", open_raw_fencelock_lua),
]  # fmt: skip


@dataclass
class RateResult:
    key: str
    label: str
    api: str
    rates: list[float] = field(default_factory=list)
    cycles: int = 0

    @property
    def rate(self) -> float:
        return statistics.median(self.rates) if self.rates else math.nan

    @property
    def micros(self) -> float:
        return 1e6 / self.rate if self.rates else math.nan


def measure_uncontended(
    fleet: Fleet, settings: Settings, versions: dict[str, str | None]
) -> list[RateResult]:
    """Interleaved rounds (each contender once per round); the median round counts."""
    opened: list[tuple[RateResult, Runner]] = []
    try:
        for spec in UNCONTENDED:
            if spec.peer is not None and versions.get(spec.peer) is None:
                continue
            runner = spec.opener(fleet.single_address, f"bench/uncontended/{spec.key}")
            opened.append((RateResult(spec.key, spec.label, spec.api), runner))
            runner.run_for(0.2)  # warm up: connections, scripts, renewer threads
        for _ in range(settings.rounds):
            for result, runner in opened:
                cycles, elapsed = runner.run_for(settings.round_seconds)
                result.rates.append(cycles / elapsed)
                result.cycles += cycles
    finally:
        for _result, runner in opened:
            with contextlib.suppress(Exception):
                runner.close()
    return [result for result, _runner in opened]


def same_api_fencelock(results: Sequence[RateResult], api: str) -> RateResult | None:
    key = "fencelock" if api == "sync" else "fencelock-async"
    return next((r for r in results if r.key == key), None)


# --------------------------------------------------------------------------- 2. contended


@dataclass(frozen=True)
class ContendedSpec:
    key: str
    label: str
    wait: str  # how a waiter learns that the lock is free
    kind: str  # "fencelock", "redis-py" or "python-redis-lock"
    address: Address
    name: str
    fair: bool = False

    def locker(self) -> Locker:
        quiet_peer_logs()  # runs in the worker process
        if self.kind == "fencelock":
            return FencelockLocker(self)
        if self.kind == "redis-py":
            return RedisPyLocker(self)
        return PythonRedisLockLocker(self)


class FencelockLocker:
    def __init__(self, spec: ContendedSpec) -> None:
        self._client = fencelock.connect(redis_url(spec.address))
        extra: dict[str, Any] = {"fair": True} if spec.fair else {}
        self._lock = self._client.lock(spec.name, ttl=TTL, renew=True, **extra)
        self._lease: fencelock.Lease | None = None

    def acquire(self) -> int:
        self._lease = self._lock.acquire(timeout=ACQUIRE_TIMEOUT)
        return self._lease.token

    def release(self) -> None:
        if self._lease is not None:
            lease, self._lease = self._lease, None
            lease.release()

    def close(self) -> None:
        self.release()
        self._client.close()


class RedisPyLocker:
    """redis-py's Lock with its default polling interval."""

    def __init__(self, spec: ContendedSpec) -> None:
        self._client = redis.Redis(host=spec.address[0], port=spec.address[1])
        self._lock = self._client.lock(spec.name, timeout=TTL, blocking_timeout=ACQUIRE_TIMEOUT)
        self._held = False

    def acquire(self) -> int:
        if not self._lock.acquire():
            raise NotAcquired(f"redis-py Lock not acquired within {ACQUIRE_TIMEOUT:g} s")
        self._held = True
        return -1

    def release(self) -> None:
        if self._held:
            self._held = False
            self._lock.release()

    def close(self) -> None:
        self.release()
        self._client.close()


class PythonRedisLockLocker:
    """python-redis-lock: waiters block in BLPOP on a signal list that release pushes to."""

    def __init__(self, spec: ContendedSpec) -> None:
        redis_lock: Any = importlib.import_module("redis_lock")
        self._client = redis.Redis(host=spec.address[0], port=spec.address[1])
        self._lock = redis_lock.Lock(self._client, spec.name, expire=int(TTL))
        self._held = False

    def acquire(self) -> int:
        if not self._lock.acquire(timeout=int(ACQUIRE_TIMEOUT)):
            raise NotAcquired(f"python-redis-lock not acquired within {ACQUIRE_TIMEOUT:g} s")
        self._held = True
        return -1

    def release(self) -> None:
        if self._held:
            self._held = False
            self._lock.release()

    def close(self) -> None:
        self.release()
        self._client.close()


@dataclass
class ServerLoad:
    """What the Redis server did during a contended run's timed window."""

    cpu_cores: float = math.nan
    requests: int = 0


def contended_run(
    spec: ContendedSpec, settings: Settings, server_pid: int
) -> tuple[list[WorkerReport], ServerLoad]:
    """One contended row: the workers' reports, and the Redis server's load meanwhile."""
    load = ServerLoad()

    def measure(start_at: float, end_at: float) -> None:
        time.sleep(max(start_at - clock.now(), 0.0))
        cpu_before, requests_before = process_cpu_seconds(server_pid), redis_requests(spec.address)
        time.sleep(max(end_at - clock.now(), 0.0))
        load.cpu_cores = (process_cpu_seconds(server_pid) - cpu_before) / (end_at - start_at)
        # less our own connection's reads (INFO, and its close)
        load.requests = redis_requests(spec.address) - requests_before - 2

    reports = run_contended(
        spec, settings.workers, settings.hold, settings.contended_seconds, during=measure
    )
    return reports, load


@dataclass
class ContendedResult(Summary):
    key: str
    label: str
    wait: str
    redis_cpu_cores: float
    redis_requests_per_section: float  # client requests (round trips) per critical section

    @property
    def fencelock(self) -> bool:
        return self.key.startswith("fencelock")


def analyse(
    spec: ContendedSpec, reports: list[WorkerReport], load: ServerLoad, settings: Settings
) -> ContendedResult:
    summary = summarise(
        reports, settings.workers, settings.contended_seconds, spec.kind == "fencelock"
    )
    in_window = summary.sections_per_second * summary.seconds
    return ContendedResult(
        **vars(summary),
        key=spec.key,
        label=spec.label,
        wait=spec.wait,
        redis_cpu_cores=load.cpu_cores,
        redis_requests_per_section=load.requests / in_window if in_window else math.nan,
    )


def contended_specs(fleet: Fleet, versions: dict[str, str | None]) -> list[ContendedSpec]:
    address = fleet.single_address
    specs = [
        ContendedSpec(
            "fencelock",
            "fencelock redis://",
            "pub/sub release message",
            "fencelock",
            address,
            "bench/contended/fencelock",
        )
    ]
    if fair_supported():
        specs.append(
            ContendedSpec(
                "fencelock-fair",
                "fencelock redis:// fair=True",
                "pub/sub release message, FIFO",
                "fencelock",
                address,
                "bench/contended/fencelock-fair",
                fair=True,
            )
        )
    else:
        print(
            "note: Client.lock takes no 'fair' keyword here, so no fair=True row", file=sys.stderr
        )
    if versions.get("redis") is not None:
        sleep_ms = redis_py_default_sleep() * 1000
        specs.append(
            ContendedSpec(
                "redis-py",
                f"redis-py Lock (sleep {sleep_ms:g} ms, default)",
                f"sleep {sleep_ms:g} ms, retry",
                "redis-py",
                address,
                "bench/contended/redis-py",
            )
        )
    if versions.get("python-redis-lock") is not None:
        specs.append(
            ContendedSpec(
                "python-redis-lock",
                "python-redis-lock",
                "BLPOP on a signal list",
                "python-redis-lock",
                address,
                "bench/contended/python-redis-lock",
            )
        )
    return specs


# --------------------------------------------------------------------------- 3-4. Redlock


@dataclass(frozen=True)
class RedlockSpec:
    key: str
    label: str
    api: str  # "sync" or "asyncio"
    kind: str  # "fencelock", "aioredlock", "redlock-py" or "pottery"
    peer: str | None  # the peer distribution it needs, if any
    tuned: bool = False  # redis-py peers: 0.1 s socket timeouts and no redis-py retries

    @property
    def tokens(self) -> bool:
        return self.kind == "fencelock"


REDLOCK = [
    RedlockSpec("fencelock", "fencelock redlock:// (tokens)", "sync", "fencelock", None),
    RedlockSpec("fencelock-async", "fencelock redlock:// asyncio (tokens)", "asyncio",
                "fencelock", None),
    RedlockSpec("aioredlock", "aioredlock (lock_timeout=30)", "asyncio", "aioredlock",
                "aioredlock"),
    RedlockSpec("redlock-py", "redlock-py (defaults)", "sync", "redlock-py", "redlock-py"),
    RedlockSpec("redlock-py-tuned", "redlock-py (0.1 s timeouts, no retries)", "sync",
                "redlock-py", "redlock-py", tuned=True),
    RedlockSpec("pottery", "pottery Redlock (defaults)", "sync", "pottery", "pottery"),
    RedlockSpec("pottery-tuned", "pottery Redlock (0.1 s timeouts, no retries)", "sync",
                "pottery", "pottery", tuned=True),
]  # fmt: skip


def peer_redis_kwargs(tuned: bool) -> dict[str, Any]:
    """redis-py client options of a peer: its defaults, or bounded like fencelock's nodes."""
    if not tuned:
        return {}
    return {
        "socket_timeout": NODE_TIMEOUT,
        "socket_connect_timeout": NODE_TIMEOUT,
        "retry": Retry(NoBackoff(), 0),
    }


def build_sync(
    spec: RedlockSpec, nodes: Sequence[Address], name: str
) -> tuple[SyncCycle, Callable[[], Any]]:
    """One acquire+release of a blocking Redlock, and how to close its clients."""
    if spec.kind == "fencelock":
        client = fencelock.connect(redlock_url(nodes))
        lock = client.lock(name, ttl=TTL, renew=True)

        def fencelock_cycle() -> int:
            lease = lock.acquire(timeout=REDLOCK_ACQUIRE_TIMEOUT)
            lease.release()
            return lease.token

        return fencelock_cycle, client.close
    if spec.kind == "redlock-py":
        module: Any = importlib.import_module("redlock")
        extra = peer_redis_kwargs(spec.tuned)
        manager = module.Redlock([{"host": h, "port": p, **extra} for h, p in nodes])

        def redlock_py_cycle() -> int:
            held = manager.lock(name, TTL_MS)
            if held is False:
                raise NotAcquired("redlock-py lock() returned False")
            manager.unlock(held)
            return -1

        def redlock_py_close() -> None:
            for server in manager.servers:
                server.close()

        return redlock_py_cycle, redlock_py_close
    if spec.kind == "pottery":
        module = importlib.import_module("pottery")
        masters = [redis.Redis(host=h, port=p, **peer_redis_kwargs(spec.tuned)) for h, p in nodes]
        redlock = module.Redlock(key=name, masters=set(masters), auto_release_time=TTL)

        def pottery_cycle() -> int:
            if not redlock.acquire(timeout=REDLOCK_ACQUIRE_TIMEOUT):
                raise NotAcquired(f"pottery acquire() gave up after {REDLOCK_ACQUIRE_TIMEOUT:g} s")
            redlock.release()
            return -1

        def pottery_close() -> None:
            for master in masters:
                master.close()

        return pottery_cycle, pottery_close
    raise ValueError(f"no blocking Redlock called {spec.kind!r}")


async def build_async(
    spec: RedlockSpec, nodes: Sequence[Address], name: str
) -> tuple[AsyncCycle, AsyncClose]:
    """One acquire+release of an asyncio Redlock, and how to close its clients."""
    if spec.kind == "fencelock":
        client = fencelock.aconnect(redlock_url(nodes))
        lock = client.lock(name, ttl=TTL, renew=True)

        async def fencelock_cycle() -> int:
            lease = await lock.acquire(timeout=REDLOCK_ACQUIRE_TIMEOUT)
            await lease.release()
            return lease.token

        return fencelock_cycle, client.aclose
    if spec.kind == "aioredlock":
        module: Any = importlib.import_module("aioredlock")
        manager = module.Aioredlock([{"host": h, "port": p} for h, p in nodes])

        async def aioredlock_cycle() -> int:
            held = await manager.lock(name, lock_timeout=TTL)
            await manager.unlock(held)
            return -1

        return aioredlock_cycle, manager.destroy
    raise ValueError(f"no asyncio Redlock called {spec.kind!r}")


class Probe:
    """A Redlock row's tally, sent to the parent by its own thread every PROGRESS_EVERY s.

    The thread keeps reporting while the main thread is stuck in a call, so a row the
    parent kills still has its counts. Messages to the parent: ("ready", counts), then
    per round ("progress", tally)... ("done", tally with the round's totals), and at the
    end ("closed", None); ("crash", traceback) on an exception. From the parent:
    ("go", seconds) for each round, then "stop".
    """

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._guard = threading.Lock()
        self.calls: list[tuple[float, bool]] = []  # (duration, acquired and released)
        self._sent = 0
        self.errors: dict[str, int] = {}
        self.first_error: str | None = None
        self.last_token = -1
        self.inversions = 0
        self.in_call_since: float | None = None
        self._round_started = math.nan
        self._round_first = 0  # index in calls of this round's first call
        self._active = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._report, name="bench-probe", daemon=True)

    def fileno(self) -> int:
        return self._conn.fileno()

    def counts(self) -> dict[str, int]:
        """Threads (less this probe's own) and open sockets (less the pipe to the parent)."""
        probe = 1 if self._thread.is_alive() else 0
        return {
            "threads": threading.active_count() - probe,
            "sockets": open_sockets(exclude=self._conn.fileno()),
        }

    def send(self, kind: str, payload: Any) -> None:
        with self._guard:
            self._send(kind, payload)

    def _send(self, kind: str, payload: Any) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._conn.send((kind, payload))

    def ready(self) -> None:
        self.send("ready", self.counts())

    def command(self, timeout: float = READY_TIMEOUT * 4) -> float | None:
        """Seconds to run the next round for, or None: "stop" (or the parent is gone)."""
        try:
            if not self._conn.poll(timeout):
                return None
            command = self._conn.recv()
        except (EOFError, OSError):
            return None
        if isinstance(command, tuple) and command[0] == "go":
            return float(command[1])
        return None

    def start_round(self) -> None:
        with self._guard:
            self._round_started = clock.now()
            self._round_first = len(self.calls)
            self._active = True
        if not self._thread.is_alive():
            self._thread.start()

    def record(self, started: float, token: int | None, error: BaseException | None) -> None:
        ended = clock.now()
        self.calls.append((ended - started, error is None))
        if error is not None:
            kind = type(error).__name__
            self.errors[kind] = self.errors.get(kind, 0) + 1
            self.first_error = self.first_error or f"{kind}: {error}"
        elif token is not None and token >= 0:
            self.inversions += token <= self.last_token
            self.last_token = token

    def _tally(self) -> dict[str, Any]:
        end = len(self.calls)
        chunk, self._sent = self.calls[self._sent : end], end
        return {
            "calls": chunk,
            "errors": dict(self.errors),
            "first_error": self.first_error,
            "inversions": self.inversions,
            "in_call_since": self.in_call_since,
            **self.counts(),
        }

    def _report(self) -> None:
        while not self._stop.wait(PROGRESS_EVERY):
            with self._guard:  # tally and send in one step: messages leave in order
                if self._active:
                    self._send("progress", self._tally())

    def end_round(self) -> None:
        with self._guard:
            self._active = False
            calls = self.calls[self._round_first :]
            tally = self._tally()
            tally["round"] = {
                "completed": sum(1 for _, ok in calls if ok),
                "failed": sum(1 for _, ok in calls if not ok),
                "elapsed": clock.now() - self._round_started,
            }
            self._send("done", tally)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(PROGRESS_EVERY * 4)


def redlock_worker(spec: RedlockSpec, nodes: list[Address], name: str, conn: Connection) -> None:
    """One Redlock row in its own process: warm up, say ready, run each round it is sent."""
    quiet_peer_logs()
    probe = Probe(conn)
    try:
        if spec.api == "asyncio":
            asyncio.run(redlock_async_main(spec, nodes, name, probe))
        else:
            redlock_sync_main(spec, nodes, name, probe)
    except BaseException:
        probe.send("crash", traceback.format_exc(limit=6))
    finally:
        conn.close()


def redlock_sync_main(spec: RedlockSpec, nodes: list[Address], name: str, probe: Probe) -> None:
    cycle, close = build_sync(spec, nodes, name)
    try:
        run_for(cycle, 0.2, BATCH, MAX_UNCONTENDED_CYCLES)  # warm up with every node up
        probe.ready()
        while (seconds := probe.command()) is not None:
            probe.start_round()
            end = clock.now() + seconds
            while len(probe.calls) < MAX_REDLOCK_CALLS:
                started = probe.in_call_since = clock.now()
                if started >= end:
                    break
                token: int | None = None
                error: BaseException | None = None
                try:
                    token = cycle()
                except Exception as exc:
                    error = exc
                probe.record(started, token, error)
                probe.in_call_since = None
                if error is not None and clock.now() - started < 0.001:
                    time.sleep(0.001)  # no hot loop on an instant failure
            probe.in_call_since = None
            probe.end_round()
    finally:
        probe.stop()
        close()
        probe.send("closed", None)


async def next_command(probe: Probe) -> float | None:
    """:meth:`Probe.command` without blocking the event loop (no thread either: the thread
    count is one of the measurements) while the other rows run their rounds."""
    loop = asyncio.get_running_loop()
    readable: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not readable.done():
            readable.set_result(None)

    loop.add_reader(probe.fileno(), wake)
    try:
        await asyncio.wait_for(readable, READY_TIMEOUT * 4)
    except asyncio.TimeoutError:
        return None
    finally:
        loop.remove_reader(probe.fileno())
    return probe.command(timeout=READY_TIMEOUT)


async def redlock_async_main(
    spec: RedlockSpec, nodes: list[Address], name: str, probe: Probe
) -> None:
    cycle, close = await build_async(spec, nodes, name)
    try:
        await arun_for(cycle, 0.2)  # warm up with every node up
        probe.ready()
        while (seconds := await next_command(probe)) is not None:
            probe.start_round()
            end = clock.now() + seconds
            while len(probe.calls) < MAX_REDLOCK_CALLS:
                started = probe.in_call_since = clock.now()
                if started >= end:
                    break
                token: int | None = None
                error: BaseException | None = None
                try:
                    token = await cycle()
                except Exception as exc:
                    error = exc
                probe.record(started, token, error)
                probe.in_call_since = None
                if error is not None and clock.now() - started < 0.001:
                    await asyncio.sleep(0.001)
            probe.in_call_since = None
            probe.end_round()
    finally:
        probe.stop()
        await close()
        probe.send("closed", None)


@dataclass
class RedlockResult:
    key: str
    label: str
    api: str
    tokens: bool
    degraded: bool
    outcome: str  # "ok", "hung", "crashed", "no start"
    rounds_cycles_per_second: list[float]
    cycles_per_second: float  # median round
    elapsed: float  # timed seconds, all rounds
    completed: int  # acquired and released
    failed: int
    latency_ms: dict[str, float | int]  # of the calls that acquired and released
    failed_latency_ms: dict[str, float | int]
    threads_before: int | None
    threads_after: int | None
    sockets_before: int | None
    sockets_after: int | None
    stuck_for: float | None  # a call still running when the row was killed, for this long
    closed: bool  # the client's close() returned in time
    errors: dict[str, int]
    first_error: str | None
    token_inversions: int


class RedlockRow:
    """One Redlock row's process, driven round by round from here."""

    def __init__(self, spec: RedlockSpec, fleet: Fleet, degraded: bool) -> None:
        self.spec, self.degraded = spec, degraded
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        name = f"bench/redlock/{'degraded' if degraded else 'up'}/{spec.key}"
        self.proc: SpawnProcess = ctx.Process(
            target=redlock_worker,
            args=(spec, fleet.node_addresses, name, child),
            name=f"bench-{spec.key}",
            daemon=True,
        )
        self.state: dict[str, Any] = {
            "calls": [], "rounds": [], "outcome": "no start", "closed": False, "stuck_for": None,
        }  # fmt: skip
        self.proc.start()
        child.close()

    @property
    def running(self) -> bool:
        return self.state["outcome"] in ("ready", "ok")

    def wait_ready(self) -> bool:
        if receive(self.conn, self.proc, clock.now() + READY_TIMEOUT, self.state, until="ready"):
            self.state["outcome"] = "ready"
        return self.running

    def run_round(self, seconds: float) -> None:
        """One timed round; a row still in a call GRACE s after its end is killed."""
        first = len(self.state["calls"])
        go_at = clock.now()
        with contextlib.suppress(OSError):
            self.conn.send(("go", seconds))
        self.state["outcome"] = "hung"
        if receive(self.conn, self.proc, go_at + seconds + GRACE, self.state, until="done"):
            self.state["outcome"] = "ok"
            self.state["rounds"].append(self.state["last"]["round"])
            return
        stopped_at = clock.now()
        self.proc.kill()
        calls = self.state["calls"][first:]
        self.state["rounds"].append(
            {
                "completed": sum(1 for _, ok in calls if ok),
                "failed": sum(1 for _, ok in calls if not ok),
                "elapsed": stopped_at - go_at,
            }
        )
        in_call_since = self.state.get("last", {}).get("in_call_since")
        if self.state["outcome"] == "hung" and in_call_since is not None:
            self.state["stuck_for"] = stopped_at - in_call_since  # one clock for both

    def finish(self) -> RedlockResult:
        """Stop the row (let its client close, briefly), leave nothing running."""
        try:
            if self.state["outcome"] in ("ready", "ok") and self.proc.is_alive():
                with contextlib.suppress(OSError):
                    self.conn.send("stop")
                receive(self.conn, self.proc, clock.now() + CLOSE_GRACE, self.state, "closed")
        finally:
            if self.proc.is_alive():
                self.proc.kill()
            self.proc.join(5)
            self.conn.close()
        return redlock_result(self.spec, self.degraded, self.state)


def receive(
    conn: Connection, proc: SpawnProcess, deadline: float, state: dict[str, Any], until: str
) -> bool:
    """Fold the row's messages into ``state`` until message ``until`` (True) or deadline."""
    while True:
        remaining = deadline - clock.now()
        if remaining <= 0:
            return False
        try:
            if not conn.poll(min(remaining, 0.1)):
                if not proc.is_alive() and not conn.poll(0):
                    if state["outcome"] not in ("ok", "ready"):
                        state["outcome"] = "crashed"
                    return False
                continue
            kind, payload = conn.recv()
        except (EOFError, OSError):
            if state["outcome"] not in ("ok", "ready"):
                state["outcome"] = "crashed"
            return False
        if kind == "ready":
            state["before"] = payload
        elif kind in ("progress", "done"):
            state["calls"].extend(payload.pop("calls"))
            state["last"] = payload
        elif kind == "closed":
            state["closed"] = True
        elif kind == "crash":
            state["outcome"] = "crashed"
            state["crash"] = payload
        if kind == until:
            return True


def redlock_result(spec: RedlockSpec, degraded: bool, state: dict[str, Any]) -> RedlockResult:
    calls: list[tuple[float, bool]] = state["calls"]
    last: dict[str, Any] = state.get("last", {})
    before: dict[str, int] = state.get("before", {})
    rounds: list[dict[str, Any]] = state["rounds"]
    rates = [r["completed"] / r["elapsed"] for r in rounds if r["elapsed"] > 0]
    first_error = last.get("first_error")
    if state.get("crash"):
        first_error = state["crash"].strip().splitlines()[-1]
    return RedlockResult(
        key=spec.key,
        label=spec.label,
        api=spec.api,
        tokens=spec.tokens,
        degraded=degraded,
        outcome=state["outcome"],
        rounds_cycles_per_second=rates,
        cycles_per_second=statistics.median(rates) if rates else math.nan,
        elapsed=sum(r["elapsed"] for r in rounds),
        completed=sum(1 for _, ok in calls if ok),
        failed=sum(1 for _, ok in calls if not ok),
        latency_ms=summary_ms([d for d, ok in calls if ok]),
        failed_latency_ms=summary_ms([d for d, ok in calls if not ok]),
        threads_before=before.get("threads"),
        threads_after=last.get("threads"),
        sockets_before=before.get("sockets"),
        sockets_after=last.get("sockets"),
        stuck_for=state["stuck_for"],
        closed=bool(state["closed"]),
        errors=dict(last.get("errors", {})),
        first_error=first_error,
        token_inversions=int(last.get("inversions", 0)),
    )


def redlock_specs(versions: dict[str, str | None]) -> list[RedlockSpec]:
    return [s for s in REDLOCK if s.peer is None or versions.get(s.peer) is not None]


def measure_redlock_up(
    fleet: Fleet, settings: Settings, versions: dict[str, str | None]
) -> list[RedlockResult]:
    """Every row's process at once, then interleaved rounds (each row once per round)."""
    window = settings.redlock_seconds / settings.redlock_rounds
    print(
        f"redlock, {NODES} nodes up: {settings.redlock_rounds} rounds x {window:g} s per lock ...",
        file=sys.stderr,
    )
    rows = [RedlockRow(spec, fleet, degraded=False) for spec in redlock_specs(versions)]
    try:
        for row in rows:
            row.wait_ready()
        for _ in range(settings.redlock_rounds):
            for row in rows:
                if row.running:
                    row.run_round(window)
    finally:
        results = [row.finish() for row in rows]
    return results


def measure_redlock_degraded(
    fleet: Fleet, settings: Settings, versions: dict[str, str | None]
) -> list[RedlockResult]:
    """One row at a time: warm up with all nodes up, fault two nodes, run, heal."""
    results = []
    for spec in redlock_specs(versions):
        print(
            f"redlock, node {HUNG} hung + node {KILLED} killed: {spec.label}, "
            f"{settings.redlock_seconds:g} s ...",
            file=sys.stderr,
        )
        row = RedlockRow(spec, fleet, degraded=True)
        faulted = False
        try:
            if row.wait_ready():
                fleet.fault()
                faulted = True
                row.run_round(settings.redlock_seconds)
        finally:
            results.append(row.finish())
            if faulted:
                fleet.heal()
    return results


# --------------------------------------------------------------------------- 5. many names

MANY_NAMES = 20
MANY_TASKS = 20  # asyncio tasks per name, one acquisition each
MANY_THREADS, MANY_REPEATS = 4, 5  # sync: threads per name x acquisitions each
MANY_HOLD = 0.01
MANY_TTL = 5.0  # a waiter whose wake-up is lost waits about this long
MANY_TIMEOUT = 120.0


@dataclass
class ManyNamesResult:
    label: str
    api: str
    acquisitions: int
    seconds: float  # from the first acquire call to the last release
    wait_ms: dict[str, float | int]  # acquire call -> return
    errors: int
    first_error: str | None


async def many_names_async(url: str, prefix: str) -> tuple[list[float], list[str]]:
    waits: list[float] = []
    errors: list[str] = []

    async def one(client: fencelock.AsyncClient, name: str) -> None:
        started = clock.now()
        try:
            async with client.lock(name, ttl=MANY_TTL, timeout=MANY_TIMEOUT):
                waits.append(clock.now() - started)
                await asyncio.sleep(MANY_HOLD)
        except fencelock.FencelockError as exc:
            errors.append(f"{type(exc).__name__}: {exc}")

    async with fencelock.aconnect(url) as client:
        names = [f"{prefix}/{i}" for i in range(MANY_NAMES)]
        await asyncio.gather(*(one(client, n) for n in names for _ in range(MANY_TASKS)))
    return waits, errors


def many_names_sync(url: str, prefix: str) -> tuple[list[float], list[str]]:
    waits: list[float] = []
    errors: list[str] = []

    def worker(client: fencelock.Client, name: str) -> None:
        for _ in range(MANY_REPEATS):
            started = clock.now()
            try:
                with client.lock(name, ttl=MANY_TTL, timeout=MANY_TIMEOUT):
                    waits.append(clock.now() - started)
                    time.sleep(MANY_HOLD)
            except fencelock.FencelockError as exc:
                errors.append(f"{type(exc).__name__}: {exc}")

    with fencelock.connect(url) as client:
        threads = [
            threading.Thread(target=worker, args=(client, f"{prefix}/{i}"), daemon=True)
            for i in range(MANY_NAMES)
            for _ in range(MANY_THREADS)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return waits, errors


def measure_many_names(fleet: Fleet) -> list[ManyNamesResult]:
    rows = [
        ("fencelock redis://", redis_url(fleet.single_address)),
        ("fencelock redlock://", redlock_url(fleet.node_addresses)),
    ]
    results = []
    for api in ("asyncio", "sync"):
        for label, url in rows:
            print(f"many names: {label} {api} ...", file=sys.stderr)
            prefix = f"bench/many/{secrets.token_hex(4)}"
            started = clock.now()
            if api == "asyncio":
                waits, errors = asyncio.run(many_names_async(url, prefix))
            else:
                waits, errors = many_names_sync(url, prefix)
            results.append(
                ManyNamesResult(
                    label=label,
                    api=api,
                    acquisitions=len(waits),
                    seconds=clock.now() - started,
                    wait_ms=summary_ms(waits),
                    errors=len(errors),
                    first_error=errors[0] if errors else None,
                )
            )
    return results


# --------------------------------------------------------------------------- targets


@dataclass
class Target:
    scenario: int
    what: str
    goal: str
    measured: str
    met: bool | None  # None: not measured (a row missing)


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or not denominator or math.isnan(denominator):
        return None
    return numerator / denominator


def at_least(scenario: int, what: str, value: float | None, goal: float, unit: str) -> Target:
    if value is None or math.isnan(value):
        return Target(scenario, what, f">= {goal:g}{unit}", "n/a", None)
    return Target(scenario, what, f">= {goal:g}{unit}", f"{value:.2f}{unit}", value >= goal)


def at_most(scenario: int, what: str, value: float | None, goal: float, unit: str) -> Target:
    if value is None or math.isnan(value):
        return Target(scenario, what, f"<= {goal:g}{unit}", "n/a", None)
    return Target(scenario, what, f"<= {goal:g}{unit}", f"{value:.3f}{unit}", value <= goal)


def targets(
    uncontended: list[RateResult],
    contended: list[ContendedResult],
    up: list[RedlockResult],
    down: list[RedlockResult],
    many: Sequence[ManyNamesResult] = (),
) -> list[Target]:
    found: list[Target] = []
    rates = {r.key: r.rate for r in uncontended}
    if uncontended:
        ours = rates.get("fencelock")
        found += [
            at_least(1, "fencelock sync ÷ redis-py Lock",
                     ratio(ours, rates.get("redis-py")), 1.0, "x"),
            at_least(1, "fencelock sync ÷ raw SET NX loop",
                     ratio(ours, rates.get("raw-set-nx")), 0.95, "x"),
            at_least(1, "fencelock asyncio ÷ redis.asyncio Lock",
                     ratio(rates.get("fencelock-async"), rates.get("redis-py-async")), 1.0, "x"),
        ]  # fmt: skip
    by_key = {c.key: c for c in contended}
    ours_c = by_key.get("fencelock")
    if ours_c is not None:
        peer = by_key.get("python-redis-lock")
        ceiling = ratio(ours_c.ceiling_per_second, peer.sections_per_second if peer else None)
        found += [
            at_least(2, f"fencelock CS/s ÷ python-redis-lock (1/hold: {fmt_ratio(ceiling)})",
                     ratio(ours_c.sections_per_second, peer.sections_per_second if peer else None),
                     1.1, "x"),
            at_most(2, "fencelock handoff p50 (all handoffs)", float(ours_c.handoff_ms["p50"]),
                    0.3, " ms"),
            at_most(2, "fencelock handoff p50 (to another worker)",
                    float(ours_c.cross_handoff_ms["p50"]), 0.3, " ms"),
            at_most(2, "fencelock worst acquire wait", float(ours_c.acquire_wait_ms["max"]),
                    100, " ms"),
        ]  # fmt: skip
    fair = by_key.get("fencelock-fair")
    if fair is not None:
        met = None if math.isnan(fair.spread) else fair.spread <= 0.10
        found.append(
            Target(2, "fair=True: every worker within ±10% of the mean", "<= ±10%",
                   fmt_number(fair.spread, "±{:.1%}"), met)
        )  # fmt: skip
    up_rate = {r.key: r.cycles_per_second for r in up}
    for key, label in (("fencelock", "sync"), ("fencelock-async", "asyncio")):
        if up:
            found.append(
                at_least(3, f"fencelock {label} ÷ aioredlock (5 up)",
                         ratio(up_rate.get(key), up_rate.get("aioredlock")), 1.0, "x")
            )  # fmt: skip
        mine = next((r for r in down if r.key == key), None)
        if mine is not None:
            found.append(
                at_least(4, f"fencelock {label}: hung+killed ÷ all up",
                         ratio(mine.cycles_per_second, up_rate.get(key)), 0.5, "x")
            )  # fmt: skip
    for r in many:
        if r.label.endswith("redlock://"):
            found.append(
                at_most(5, f"fencelock redlock:// {r.api}: worst wait (ttl {MANY_TTL:g} s)",
                        float(r.wait_ms["max"]) / 1000, MANY_TTL / 5, " s")
            )  # fmt: skip
    return found


# --------------------------------------------------------------------------- output


def fmt_rate(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:,.0f}"


def fmt_ratio(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.2f}x"


def fmt_count_change(before: int | None, after: int | None) -> str:
    if before is None or after is None or before < 0 or after < 0:
        return "-"
    return f"{before} → {after}" if before != after else str(before)


def uncontended_table(results: list[RateResult], settings: Settings) -> Table:
    table = new_table(
        f"1. Uncontended acquire+release on one Redis, one process, one name "
        f"(median of {settings.rounds} interleaved rounds x {settings.round_seconds:g} s)",
        ("lock", "API", "cycles/s", "µs/cycle", "each round (cycles/s)",
         "fencelock (same API) ÷ this"),
        left=2,
    )  # fmt: skip
    for r in results:
        ours = same_api_fencelock(results, r.api)
        table.add_row(
            r.label, r.api, fmt_rate(r.rate), fmt_number(r.micros, "{:.1f}"),
            " ".join(f"{x:,.0f}" for x in r.rates), fmt_ratio(ratio(ours.rate if ours else None,
                                                                   r.rate)),
        )  # fmt: skip
    return table


def handoff_table(results: list[ContendedResult], settings: Settings) -> Table:
    table = new_table(
        f"2a. Contended: {settings.workers} processes, one name on one Redis, hold "
        f"{settings.hold * 1000:g} ms, {settings.contended_seconds:g} s each; "
        "handoff = next acquire return - release call start (ms)",
        ("lock", "waiter wakes by", "CS/s", "fencelock ÷ this", "handoff p50", "p99", "max",
         "to other worker p50", "p99", "max", "handoffs (to other)"),
        left=2,
    )  # fmt: skip
    ours = next((c for c in results if c.key == "fencelock"), None)
    for c in results:
        h, x = c.handoff_ms, c.cross_handoff_ms
        table.add_row(
            c.label, c.wait, f"{c.sections_per_second:,.0f}",
            fmt_ratio(ratio(ours.sections_per_second if ours else None, c.sections_per_second)),
            fmt_ms(h["p50"]), fmt_ms(h["p99"]), fmt_ms(h["max"]),
            fmt_ms(x["p50"]), fmt_ms(x["p99"]), fmt_ms(x["max"]), f"{h['n']:,} ({x['n']:,})",
        )  # fmt: skip
    return table


def fairness_table(results: list[ContendedResult]) -> Table:
    table = new_table(
        "2b. Contended: fairness, acquire() wait (ms), CPU and safety checks",
        ("lock", "sections per worker", "Jain", "spread", "self re-acq", "wait p99",
         "worst wait", "CPU cores (workers / redis)", "requests per CS", "overlaps",
         "token inv.", "errors"),
        left=2,
    )  # fmt: skip
    for c in results:
        table.add_row(
            c.label, " ".join(str(n) for n in c.per_worker), fmt_number(c.jain_index, "{:.2f}"),
            fmt_number(c.spread, "±{:.0%}"), fmt_number(c.self_reacquire_fraction, "{:.0%}"),
            fmt_ms(c.acquire_wait_ms["p99"]), fmt_ms(c.acquire_wait_ms["max"]),
            f"{c.cpu_cores:.2f} / {fmt_number(c.redis_cpu_cores, '{:.2f}')}",
            fmt_number(c.redis_requests_per_section, "{:.1f}"), str(c.overlaps),
            str(c.token_inversions) if c.key.startswith("fencelock") else "n/a", str(c.errors),
        )  # fmt: skip
    return table


def shorten(text: str, limit: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def redlock_outcome(r: RedlockResult) -> str:
    if r.outcome == "hung":
        stuck = f" after {r.stuck_for:.1f} s" if r.stuck_for is not None else ""
        what = "completed nothing" if r.completed == 0 else f"completed {r.completed:,}"
        return f"{what}; a call had not returned{stuck}: killed"
    error = shorten(r.first_error or "?")
    if r.outcome != "ok":
        return f"{r.outcome}: {error}"
    if r.completed == 0:
        return f"completed nothing: {r.failed:,} failed calls; first: {error}"
    if r.failed:
        return f"{r.failed:,} failed calls; first: {error}"
    return "ok" if r.closed else "ok (close() did not return)"


def redlock_table(
    results: list[RedlockResult], title: str, all_up: list[RedlockResult] | None
) -> Table:
    columns = ["lock", "API", "cycles/s"]
    columns += ["÷ all up"] if all_up is not None else ["fencelock (same API) ÷ this"]
    columns += ["p50 ms", "p99 ms", "max ms", "threads", "sockets", "outcome"]
    table = new_table(title, columns, left=2)
    up_rate = {r.key: r.cycles_per_second for r in all_up or []}
    for r in results:
        if all_up is not None:
            compared = fmt_ratio(ratio(r.cycles_per_second, up_rate.get(r.key)))
        else:
            ours_key = "fencelock" if r.api == "sync" else "fencelock-async"
            ours = next((x for x in results if x.key == ours_key), None)
            compared = fmt_ratio(
                ratio(ours.cycles_per_second if ours else None, r.cycles_per_second)
            )
        lat = r.latency_ms
        table.add_row(
            r.label, r.api, fmt_rate(r.cycles_per_second), compared,
            fmt_ms(lat["p50"]), fmt_ms(lat["p99"]), fmt_ms(lat["max"]),
            fmt_count_change(r.threads_before, r.threads_after),
            fmt_count_change(r.sockets_before, r.sockets_after), redlock_outcome(r),
        )  # fmt: skip
    return table


def many_names_table(results: list[ManyNamesResult]) -> Table:
    table = new_table(
        f"5. Many names contended in one process: {MANY_NAMES} names, "
        f"{MANY_NAMES * MANY_TASKS} acquisitions ({MANY_TASKS} asyncio tasks per name; sync: "
        f"{MANY_THREADS} threads x {MANY_REPEATS}), {MANY_HOLD * 1000:g} ms holds, "
        f"ttl={MANY_TTL:g} s; acquire wait",
        ("lock", "API", "acquired", "total s", "wait p50 ms", "p90 ms", "max ms", "errors"),
        left=2,
    )
    for r in results:
        w = r.wait_ms
        table.add_row(
            r.label, r.api, str(r.acquisitions), f"{r.seconds:.2f}",
            fmt_ms(w["p50"]), fmt_ms(w["p90"]), fmt_ms(w["max"]), str(r.errors),
        )  # fmt: skip
    return table


def targets_table(found: list[Target]) -> Table:
    table = new_table("Targets", ("#", "target", "goal", "measured", "met"), left=2)
    for t in sorted(found, key=lambda t: t.scenario):
        met = "n/a" if t.met is None else ("[green]yes[/green]" if t.met else "[red]no[/red]")
        table.add_row(str(t.scenario), t.what, t.goal, t.measured, met)
    return table


@dataclass
class Results:
    uncontended: list[RateResult] = field(default_factory=list)
    contended: list[ContendedResult] = field(default_factory=list)
    redlock_up: list[RedlockResult] = field(default_factory=list)
    redlock_degraded: list[RedlockResult] = field(default_factory=list)
    many_names: list[ManyNamesResult] = field(default_factory=list)
    load_at_start: tuple[float, float, float] | None = None  # other work on the host skews rates
    warnings: list[str] = field(default_factory=list)


def noise_warnings(results: Results) -> list[str]:
    """Rows whose rounds disagree, and a busy host: the ratios are not to be trusted then."""
    found = []
    rows = [(r.label, r.rates) for r in results.uncontended]
    rows += [(r.label, r.rounds_cycles_per_second) for r in results.redlock_up]
    for label, rates in rows:
        if len(rates) > 1 and min(rates) > 0 and max(rates) / min(rates) > NOISY_ROUNDS:
            found.append(
                f"{label}: rounds range {min(rates):,.0f}-{max(rates):,.0f} cycles/s "
                f"(more than {NOISY_ROUNDS - 1:.0%} apart)"
            )
    busy = max((x[0] for x in (results.load_at_start, load_average()) if x), default=0.0)
    if busy > (os.cpu_count() or 1):
        found.append(f"load average {busy:.1f} on {os.cpu_count()} CPUs: other work was running")
    return found


def tables(results: Results, settings: Settings, found: list[Target]) -> list[Table]:
    out: list[Table] = []
    if results.uncontended:
        out.append(uncontended_table(results.uncontended, settings))
    if results.contended:
        out += [handoff_table(results.contended, settings), fairness_table(results.contended)]
    if results.redlock_up:
        out.append(
            redlock_table(
                results.redlock_up,
                f"3. Redlock, {NODES} nodes up: acquire+release in one process per lock, median "
                f"of {settings.redlock_rounds} interleaved rounds x "
                f"{settings.redlock_seconds / settings.redlock_rounds:g} s; latency of one cycle",
                None,
            )
        )
    if results.redlock_degraded:
        out.append(
            redlock_table(
                results.redlock_degraded,
                f"4. Redlock, node {HUNG} hung (SIGSTOP) + node {KILLED} killed after warm-up; "
                f"{settings.redlock_seconds:g} s per row, killed {GRACE:g} s after if a call "
                "hangs; threads and sockets before → after",
                results.redlock_up,
            )
        )
    if results.many_names:
        out.append(many_names_table(results.many_names))
    if found:
        out.append(targets_table(found))
    return out


def render(results: Results, made: list[Table]) -> None:
    console = Console(width=None if sys.stdout.isatty() else 200)
    for table in made:
        console.print(table)
    for c in results.contended:
        if c.first_error:
            last_line = c.first_error.strip().splitlines()[-1]
            console.print(f"[red]{c.label}: {c.errors} errors; first: {last_line}[/red]")
    for m in results.many_names:
        if m.first_error:
            console.print(
                f"[red]{m.label} {m.api}: {m.errors} errors; first: {m.first_error}[/red]"
            )
    for warning in results.warnings:
        console.print(f"[yellow]noisy: {warning}; rerun on a quiet host for stable ratios[/yellow]")


def write_json(
    results: Results,
    settings: Settings,
    versions: dict[str, str | None],
    found: list[Target],
    elapsed: float,
) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = RESULTS_DIR / f"redis-{stamp}.json"
    document = {
        "benchmark": "redis_bench",
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "seconds": elapsed,
        "settings": asdict(settings),
        "environment": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "redis_server": redis_server_version(),
            "fencelock": fencelock.__version__,
            "git": git_state(),
            "fair_keyword": fair_supported(),
            "peers": versions,
            "load_average_at_start": results.load_at_start,
            "load_average_at_end": load_average(),
        },
        "uncontended": [
            {
                "key": r.key,
                "label": r.label,
                "api": r.api,
                "cycles_per_second": r.rate,
                "micros_per_cycle": r.micros,
                "rounds_cycles_per_second": r.rates,
                "total_cycles": r.cycles,
                "fencelock_ratio": ratio(
                    (same_api_fencelock(results.uncontended, r.api) or r).rate, r.rate
                ),
            }
            for r in results.uncontended
        ],
        "contended": [asdict(c) for c in results.contended],
        "redlock_all_up": [asdict(r) for r in results.redlock_up],
        "redlock_hung_and_killed": [asdict(r) for r in results.redlock_degraded],
        "many_names": [asdict(r) for r in results.many_names],
        "targets": [asdict(t) for t in found],
        "warnings": results.warnings,
    }
    path.write_text(json.dumps(clean_json(document), indent=2, allow_nan=False) + "\n")
    return path


def load_average() -> tuple[float, float, float] | None:
    return os.getloadavg() if hasattr(os, "getloadavg") else None


def git_state() -> str | None:
    """The commit measured, with "-dirty" if the work tree had changes (read-only git)."""
    import subprocess

    with contextlib.suppress(OSError, subprocess.SubprocessError):
        done = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "describe", "--always", "--dirty"],
            capture_output=True, text=True, check=False, timeout=10,
        )  # fmt: skip
        return done.stdout.strip() or None
    return None


def redis_server_version() -> str | None:
    import shutil
    import subprocess

    binary = shutil.which("redis-server")
    if binary is None:
        return None
    done = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip()


# --------------------------------------------------------------------------- main


@contextlib.contextmanager
def terminated_by_sigterm() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so the servers are stopped either way."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def failed(results: Results) -> list[str]:
    """fencelock rows that broke mutual exclusion, token order, or hit errors."""
    problems = []
    for c in results.contended:
        if c.fencelock and (c.errors or c.overlaps or c.token_inversions):
            problems.append(f"{c.label}: {c.errors} errors, {c.overlaps} overlaps, "
                            f"{c.token_inversions} token inversions")  # fmt: skip
    for r in (*results.redlock_up, *results.redlock_degraded):
        if r.tokens and (r.outcome != "ok" or r.token_inversions or (not r.degraded and r.failed)):
            problems.append(f"{r.label}: {r.outcome}, {r.failed} failed calls, "
                            f"{r.token_inversions} token inversions")  # fmt: skip
    for m in results.many_names:
        if m.errors:
            problems.append(f"{m.label} {m.api} (many names): {m.errors} errors")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    settings = Settings.from_args(argv)
    quiet_peer_logs()
    versions = peer_versions()
    if versions.get("redis") is None:
        print("error: redis-py is needed (pip install -e '.[redis,bench]')", file=sys.stderr)
        return 2
    started = time.monotonic()
    results = Results(load_at_start=load_average())
    with (
        terminated_by_sigterm(),
        tempfile.TemporaryDirectory(prefix="fencelock-redis-bench-") as name,
    ):
        fleet = Fleet(Path(name))
        try:
            try:
                fleet.start(NODES)
            except RuntimeError as exc:  # no redis-server binary, or it would not start
                print(f"error: {exc}", file=sys.stderr)
                return 2
            print(
                f"redis-servers: single on {fleet.single.port}, Redlock nodes on "
                f"{', '.join(str(n.port) for n in fleet.nodes)}",
                file=sys.stderr,
            )
            run_scenarios(fleet, settings, versions, results)
        finally:
            fleet.stop()
    found = targets(
        results.uncontended,
        results.contended,
        results.redlock_up,
        results.redlock_degraded,
        results.many_names,
    )
    results.warnings = noise_warnings(results)
    made = tables(results, settings, found)
    render(results, made)
    elapsed = time.monotonic() - started
    path = write_json(results, settings, versions, found, elapsed)
    loads = " -> ".join(f"{x[0]:.1f}" for x in (results.load_at_start, load_average()) if x)
    path.with_suffix(".md").write_text(
        f"Load average {loads} on {os.cpu_count()} CPUs, {elapsed:.0f} s.\n\n"
        + "\n".join(table_markdown(table) for table in made)
    )
    print(
        f"results: {path} and .md ({elapsed:.0f} s; load average {loads} on {os.cpu_count()} CPUs)"
    )
    problems = failed(results)
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return 1 if problems else 0


def run_scenarios(
    fleet: Fleet, settings: Settings, versions: dict[str, str | None], results: Results
) -> None:
    if 1 in settings.scenarios:
        print(
            f"uncontended: {settings.rounds} rounds x {settings.round_seconds:g} s per lock ...",
            file=sys.stderr,
        )
        results.uncontended = measure_uncontended(fleet, settings, versions)
    if 2 in settings.scenarios:
        for spec in contended_specs(fleet, versions):
            print(
                f"contended: {spec.label}, {settings.workers} processes, "
                f"{settings.contended_seconds:g} s ...",
                file=sys.stderr,
            )
            reports, load = contended_run(spec, settings, fleet.single.pid)
            results.contended.append(analyse(spec, reports, load, settings))
    if 3 in settings.scenarios or 4 in settings.scenarios:
        results.redlock_up = measure_redlock_up(fleet, settings, versions)
    if 4 in settings.scenarios:
        results.redlock_degraded = measure_redlock_degraded(fleet, settings, versions)
    if 5 in settings.scenarios:
        results.many_names = measure_many_names(fleet)


if __name__ == "__main__":
    sys.exit(main())
