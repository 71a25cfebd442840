"""Scenario 2: N processes on one name: handoff latency, fairness, critical sections/s."""

from __future__ import annotations

import importlib
import importlib.metadata
import math
import sys
import time
from dataclasses import dataclass
from typing import Any

import redis
import redis.asyncio
from harness import (
    ACQUIRE_TIMEOUT,
    Locker,
    Summary,
    WorkerReport,
    run_contended,
    summarise,
)

import fencelock
from fencelock import clock
from redisbench.common import (
    TTL,
    Address,
    NotAcquired,
    Settings,
    fair_supported,
    quiet_peer_logs,
    redis_py_default_sleep,
    redis_url,
)
from redisbench.fleet import Fleet, process_cpu_seconds, redis_requests


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
