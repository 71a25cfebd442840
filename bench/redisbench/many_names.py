"""Scenario 5: many names contended at once, in one process (lost wake-ups show)."""

from __future__ import annotations

import asyncio
import secrets
import sys
import threading
import time
from dataclasses import dataclass

from harness.stats import summary_ms

import fencelock
from fencelock import clock
from redisbench.common import redis_url, redlock_url
from redisbench.fleet import Fleet

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
