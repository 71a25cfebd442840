"""What the metrics cost on the uncontended path: acquire + release cycles with the
registry recording and with it switched off (``fencelock.metrics.configure(enabled=
False)``), interleaved rounds in one process, on the in-process backends where a cycle
is cheapest (so the share is the largest it can be) and on Redis.

Run with ``.venv/bin/python bench/metrics_bench.py`` (``--quick``: shorter rounds). The
switched-off path still makes the registry's calls (each returns at once), so the
share is of the recording itself; the issue's bound is 3 %.
"""

from __future__ import annotations

import statistics
import sys

from harness.cli import add_rounds, parser
from harness.lockers import fencelock_cycle
from harness.rounds import timed
from harness.servers import backend_url, server_pool
from harness.tables import console, rows_table

import fencelock
from fencelock import metrics

BACKENDS = ("memory", "sqlite", "redis")


def cycles_per_second(client: fencelock.Client, seconds: float) -> float:
    return timed(fencelock_cycle(client.lock("bench/metrics", ttl=30), None), seconds, 50).rate


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


def main() -> int:
    made = parser(__doc__, "shorter rounds")
    add_rounds(made, rounds=7, seconds=1.0)
    args = made.parse_args()
    rounds, seconds = (3, 0.3) if args.quick else (args.rounds, args.seconds)
    found = []
    with server_pool() as (pool, tmp):
        for backend in BACKENDS:
            on, off = measure(backend_url(pool, tmp, backend, "metrics-bench"), rounds, seconds)
            found.append((backend, on, off))
    table = rows_table(
        "Metrics on the uncontended path: acquire + release cycles/s",
        found,
        [
            ("backend", lambda r: r[0]),
            ("metrics on", lambda r: f"{r[1]:,.0f}"),
            ("metrics off", lambda r: f"{r[2]:,.0f}"),
            ("cost", lambda r: f"{(r[2] - r[1]) / r[2]:+.1%}"),
        ],
    )
    console(100).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
