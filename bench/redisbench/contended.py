"""Scenario 2: N processes on one name: handoff latency, fairness, critical sections/s."""

from __future__ import annotations

import importlib
import math
import sys
import time
from dataclasses import dataclass
from typing import Any

import redis
from harness.lockers import FencelockLocker, PeerLocker
from harness.servers import process_cpu_seconds
from harness.stats import Summary, summarise
from harness.workers import ACQUIRE_TIMEOUT, Locker, WorkerReport, run_contended

from fencelock import clock
from redisbench.common import (
    TTL,
    Address,
    Settings,
    fair_supported,
    quiet_peer_logs,
    redis_py_default_sleep,
    redis_url,
)
from redisbench.fleet import Fleet, redis_requests


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
        host, port = self.address
        if self.kind == "fencelock":
            url = redis_url(self.address)
            return FencelockLocker(url, self.name, ttl=TTL, renew=True, fair=self.fair)
        client = redis.Redis(host=host, port=port)
        if self.kind == "redis-py":  # its default polling interval
            lock = client.lock(self.name, timeout=TTL, blocking_timeout=ACQUIRE_TIMEOUT)
            return PeerLocker(lock, client.close, "redis-py Lock")
        # python-redis-lock: waiters block in BLPOP on a signal list that release pushes to
        redis_lock: Any = importlib.import_module("redis_lock")
        lock = redis_lock.Lock(client, self.name, expire=int(TTL))
        return PeerLocker(lock, client.close, "python-redis-lock", timeout=int(ACQUIRE_TIMEOUT))


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
