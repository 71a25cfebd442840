"""Scenario 1: uncontended acquire+release cycles/s, fencelock beside each peer."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.metadata
import math
import secrets
import statistics
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import redis
import redis.asyncio
from harness import (
    ACQUIRE_TIMEOUT,
    run_for,
)

import fencelock
from fencelock import clock
from fencelock.backends.redis.scripts import LockKeys, lua
from redisbench.common import (
    BATCH,
    CAD_LUA,
    MAX_UNCONTENDED_CYCLES,
    TTL,
    TTL_MS,
    Address,
    AsyncClose,
    AsyncCycle,
    NotAcquired,
    Settings,
    SyncCycle,
    redis_url,
)
from redisbench.fleet import Fleet


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
