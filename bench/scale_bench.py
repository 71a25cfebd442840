"""One client holding many leases: what renewing them costs, what a lease weighs, and
whether acquiring one more gets slower, at 100, 1,000 and 10,000 held leases.

Run with ``.venv/bin/python bench/scale_bench.py`` (``--quick``: 100 and 1,000 only,
shorter windows; ``--backends sqlite,redis``). Per backend and size, in a fresh
process: acquire N leases (TTL 30 s, renewed by the client's one renewer: each is due
every 10 s), then measure the process's CPU time over a window of two renewal rounds
(the share of one core the renewals take while nothing else runs), the memory the
leases hold (tracemalloc, per lease), and the latency of acquiring and releasing one
more lease (p50 and p99 of 50).
"""

from __future__ import annotations

import json
import multiprocessing as mp
import statistics
import sys
import time
import tracemalloc

from harness.cli import add_backends, backends, parser
from harness.results import stamped
from harness.servers import backend_url, server_pool
from harness.tables import Column, console, rows_table

import fencelock

BACKENDS = ("sqlite", "redis", "redis-cluster", "postgresql", "etcd", "zookeeper")
TTL = 30.0


def measure(url: str, held: int, window: float, out: mp.Queue) -> None:  # type: ignore[type-arg]
    """In a process of its own: hold ``held`` leases and measure; the result to ``out``."""
    try:
        with fencelock.connect(url) as client:
            tracemalloc.start()
            before = tracemalloc.take_snapshot()
            started = time.perf_counter()
            leases = [client.lock(f"scale/{n}", ttl=TTL).acquire() for n in range(held)]
            acquired_in = time.perf_counter() - started
            after = tracemalloc.take_snapshot()
            tracemalloc.stop()
            grown = sum(s.size_diff for s in after.compare_to(before, "filename"))
            cpu0, wall0 = time.process_time(), time.perf_counter()
            time.sleep(window)
            cpu = (time.process_time() - cpu0) / (time.perf_counter() - wall0)
            lost = sum(lease.lost for lease in leases)
            one_more = []
            for _ in range(50):
                t = time.perf_counter()
                client.lock("scale/one-more", ttl=TTL).acquire().release()
                one_more.append(time.perf_counter() - t)
            one_more.sort()
            for lease in leases:
                lease.release()
        out.put(
            {
                "held": held,
                "acquired_per_s": held / acquired_in,
                "cpu_share": cpu,
                "bytes_per_lease": grown / held,
                "acquire_p50_ms": statistics.median(one_more) * 1000,
                "acquire_p99_ms": one_more[int(len(one_more) * 0.99) - 1] * 1000,
                "lost": lost,
            }
        )
    except BaseException as exc:
        out.put({"held": held, "error": repr(exc)})


def run(url: str, held: int, window: float) -> dict[str, object]:
    context = mp.get_context("spawn")
    out: mp.Queue = context.Queue()  # type: ignore[type-arg]
    process = context.Process(target=measure, args=(url, held, window, out))
    process.start()
    result: dict[str, object] = out.get(timeout=window + 900)
    process.join(60)
    return result


def cell(header: str, key: str, spec: str) -> Column:
    """A column of a result's ``key``, blank on a row that failed."""
    return (header, lambda r: "" if "error" in r else spec.format(r[key]))


COLUMNS: list[Column] = [
    ("backend", lambda r: r["backend"]),
    ("held", lambda r: f"{r['held']:,}"),
    ("acquired/s", lambda r: str(r["error"]) if "error" in r else f"{r['acquired_per_s']:,.0f}"),
    cell("CPU (share of a core)", "cpu_share", "{:.1%}"),
    cell("bytes/lease", "bytes_per_lease", "{:,.0f}"),
    cell("one more: p50 ms", "acquire_p50_ms", "{:.2f}"),
    cell("p99 ms", "acquire_p99_ms", "{:.2f}"),
    cell("lost", "lost", "{}"),
]


def main() -> int:
    made = parser(__doc__, "100 and 1,000 leases only, shorter windows")
    add_backends(made, BACKENDS)
    args = made.parse_args()
    sizes = (100, 1000) if args.quick else (100, 1000, 10_000)
    window = 12.0 if args.quick else 21.0  # two renewal rounds (every TTL/3 = 10 s)
    wanted = backends(made, args.backends, BACKENDS)
    results: list[dict[str, object]] = []
    with server_pool() as (pool, tmp):
        urls = {backend: backend_url(pool, tmp, backend, "scale") for backend in wanted}
        for backend in wanted:
            for held in sizes:
                results.append({"backend": backend, **run(urls[backend], held, window)})
    title = f"One client holding N leases (TTL {TTL:g} s, renewed every ~10 s)"
    console(130).print(rows_table(title, results, COLUMNS))
    path = stamped("scale")
    path.write_text(json.dumps(results, indent=2))
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
