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

import argparse
import json
import multiprocessing as mp
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

from rich.console import Console
from rich.table import Table

import fencelock
from fencelock.testing.pool import ServerPool

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


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--backends", default="sqlite,redis,redis-cluster,postgresql,etcd,zookeeper"
    )
    args = parser.parse_args()
    sizes = (100, 1000) if args.quick else (100, 1000, 10_000)
    window = 12.0 if args.quick else 21.0  # two renewal rounds (every TTL/3 = 10 s)
    wanted = args.backends.split(",")
    table = Table(title=f"One client holding N leases (TTL {TTL:g} s, renewed every ~10 s)")
    for header in ("backend", "held", "acquired/s", "CPU (share of a core)",
                   "bytes/lease", "one more: p50 ms", "p99 ms", "lost"):  # fmt: skip
        table.add_column(header, justify="left" if header == "backend" else "right")
    results: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        pool = ServerPool.under(Path(tmp))
        try:
            urls = {"sqlite": f"sqlite:///{tmp}/scale.db"}
            if "redis" in wanted:
                urls["redis"] = pool.start("redis").url
            if "redis-cluster" in wanted:
                urls["redis-cluster"] = f"redis+cluster://{pool.redis_cluster(3)[0].address}"
            if "postgresql" in wanted:
                urls["postgresql"] = pool.postgresql().url
            if "etcd" in wanted:
                urls["etcd"] = pool.etcd(1)[0].url
            if "zookeeper" in wanted:
                urls["zookeeper"] = pool.zookeeper(1)[0].url
            for backend in wanted:
                for held in sizes:
                    result = {"backend": backend, **run(urls[backend], held, window)}
                    results.append(result)
                    if "error" in result:
                        table.add_row(backend, str(held), str(result["error"]), "", "", "", "", "")
                        continue
                    table.add_row(
                        backend,
                        f"{held:,}",
                        f"{result['acquired_per_s']:,.0f}",
                        f"{result['cpu_share']:.1%}",
                        f"{result['bytes_per_lease']:,.0f}",
                        f"{result['acquire_p50_ms']:.2f}",
                        f"{result['acquire_p99_ms']:.2f}",
                        str(result["lost"]),
                    )
        finally:
            for server in reversed(pool.servers):
                server.stop()
    Console(width=130).print(table)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = Path(__file__).parent / "results" / f"scale-{stamp}.json"
    path.write_text(json.dumps(results, indent=2))
    print(f"results: {path}")


if __name__ == "__main__":
    main()
