"""What the metrics cost on the uncontended path: acquire + release cycles with the
registry recording and with it switched off (``fencelock.metrics.configure(enabled=
False)``), interleaved rounds in one process, on the in-process backends where a cycle
is cheapest (so the share is the largest it can be) and on Redis.

Run with ``.venv/bin/python bench/metrics_bench.py`` (``--quick``: shorter rounds). The
switched-off path still makes the registry's calls (each returns at once), so the
share is of the recording itself; the issue's bound is 3 %.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

import fencelock
from fencelock import metrics
from fencelock.testing.pool import ServerPool


def cycles_per_second(client: fencelock.Client, seconds: float) -> float:
    lock = client.lock("bench/metrics", ttl=30)
    done, deadline = 0, time.perf_counter() + seconds
    started = time.perf_counter()
    while time.perf_counter() < deadline:
        for _ in range(50):
            lock.acquire().release()
        done += 50
    return done / (time.perf_counter() - started)


def measure(url: str, rounds: int, seconds: float) -> tuple[float, float]:
    """Median cycles/s with the metrics on and off, rounds taken in turn."""
    on: list[float] = []
    off: list[float] = []
    with fencelock.connect(url) as client:
        cycles_per_second(client, seconds / 2)  # warm up
        for _ in range(rounds):
            for enabled, into in ((True, on), (False, off)):
                metrics.configure(enabled=enabled)
                into.append(cycles_per_second(client, seconds))
    metrics.configure(enabled=True)
    return statistics.median(on), statistics.median(off)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rounds, seconds = (3, 0.3) if args.quick else (args.rounds, args.seconds)
    table = Table(title="Metrics on the uncontended path: acquire + release cycles/s")
    for header in ("backend", "metrics on", "metrics off", "cost"):
        table.add_column(header, justify="left" if header == "backend" else "right")
    with tempfile.TemporaryDirectory() as tmp:
        pool = ServerPool.under(Path(tmp))
        try:
            redis = pool.start("redis")
            urls = {
                "memory": "memory://metrics-bench",
                "sqlite": f"sqlite:///{tmp}/bench.db",
                "redis": redis.url,
            }
            for backend, url in urls.items():
                on, off = measure(url, rounds, seconds)
                table.add_row(backend, f"{on:,.0f}", f"{off:,.0f}", f"{(off - on) / off:+.1%}")
        finally:
            for server in reversed(pool.servers):
                server.stop()
    Console(width=100).print(table)


if __name__ == "__main__":
    main()
