"""Scenario 1: uncontended acquire+release cycles/s, fencelock beside each peer."""

from __future__ import annotations

import importlib
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import redis
import redis.asyncio
from harness.lockers import NotAcquired, acquire_release, afencelock_cycle, fencelock_cycle
from harness.rounds import AsyncCycle, AsyncRunner, RateResult, Runner, SyncRunner, interleave
from harness.workers import ACQUIRE_TIMEOUT

import fencelock
from fencelock.backends.redis.scripts import LockKeys, lua
from redisbench.common import BATCH, CAD_LUA, TTL, TTL_MS, Address, AsyncClose, Settings, redis_url
from redisbench.fleet import Fleet


def open_fencelock(address: Address, name: str) -> Runner:
    client = fencelock.connect(redis_url(address))
    return SyncRunner(fencelock_cycle(client.lock(name, ttl=TTL, renew=True)), client.close)


def open_fencelock_async(address: Address, name: str) -> Runner:
    async def setup() -> tuple[AsyncCycle, AsyncClose]:
        client = fencelock.aconnect(redis_url(address))
        return afencelock_cycle(client.lock(name, ttl=TTL, renew=True)), client.aclose

    return AsyncRunner(setup)


def open_redis_py(address: Address, name: str) -> Runner:
    client = redis.Redis(host=address[0], port=address[1])
    lock = client.lock(name, timeout=TTL)
    cycle = acquire_release(lock, f"redis-py Lock {name!r}", blocking_timeout=ACQUIRE_TIMEOUT)
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
    cycle = acquire_release(lock, f"python-redis-lock {name!r}", timeout=int(ACQUIRE_TIMEOUT))
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


def measure_uncontended(
    fleet: Fleet, settings: Settings, versions: dict[str, str | None]
) -> list[RateResult]:
    """Interleaved rounds (each contender once per round); the median round counts.

    A result's ``group`` is its API ("sync" or "asyncio")."""
    sides = [
        (
            RateResult(spec.key, spec.label, spec.api),
            lambda spec=spec: spec.opener(fleet.single_address, f"bench/uncontended/{spec.key}"),
        )
        for spec in UNCONTENDED
        if spec.peer is None or versions.get(spec.peer) is not None
    ]
    return interleave(sides, settings.rounds, settings.round_seconds, warmup=0.2, batch=BATCH)


def same_api_fencelock(results: Sequence[RateResult], api: str) -> RateResult | None:
    key = "fencelock" if api == "sync" else "fencelock-async"
    return next((r for r in results if r.key == key), None)
