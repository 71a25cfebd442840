"""etcd and ZooKeeper: fencelock beside kazoo's ``Lock`` and python-etcd3's lock, in one run.

Starts its own servers (single members by default, ``--members 3`` for the clusters;
fsync on, so every write costs a disk flush) and measures, per lock:

1. uncontended: one process, one name, acquire then release at once (cycles/s);
2. contended: 8 worker processes on one name holding it 1 ms (critical sections/s,
   fairness as Jain's index, the longest wait: a missed wake-up shows as a wait near
   the 20 s acquire timeout).

Peers that are not installed are skipped (the ``bench`` extra has them). python-etcd3's
generated protobuf code needs ``PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python`` with
protobuf >= 4; this script sets it, so its numbers are for that (slower) implementation,
the only one it runs with today. Ratios are fencelock ÷ peer.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")  # python-etcd3

from harness import (
    ACQUIRE_TIMEOUT,
    RESULTS_DIR,
    Locker,
    clean_json,
    new_table,
    run_contended,
    run_for,
    summarise,
)
from rich.console import Console

import fencelock
from fencelock.testing import ServerPool

TTL = 10
NAME = "bench/consensus"


# ------------------------------------------------------------------------- the lockers


class FencelockLocker:
    def __init__(self, url: str) -> None:
        self._client = fencelock.connect(url)
        self._lock = self._client.lock(NAME, ttl=TTL)
        self._lease: fencelock.Lease | None = None

    def acquire(self) -> int:
        self._lease = self._lock.acquire(timeout=ACQUIRE_TIMEOUT)
        return self._lease.token

    def release(self) -> None:
        if self._lease is not None:
            self._lease.release()

    def close(self) -> None:
        self._client.close()


class KazooLocker:
    def __init__(self, hosts: str) -> None:
        from kazoo.client import KazooClient

        self._client = KazooClient(hosts=hosts, timeout=TTL)
        self._client.start(30)
        self._lock = self._client.Lock(f"/bench-kazoo/{NAME}", uuid.uuid4().hex)

    def acquire(self) -> int:
        if not self._lock.acquire(timeout=ACQUIRE_TIMEOUT):
            raise TimeoutError("kazoo Lock not acquired")
        return -1

    def release(self) -> None:
        self._lock.release()

    def close(self) -> None:
        self._client.stop()
        self._client.close()


class Etcd3Locker:
    def __init__(self, address: str) -> None:
        import etcd3

        host, port = address.rsplit(":", 1)
        self._client = etcd3.client(host=host, port=int(port))
        self._lock = self._client.lock(NAME, ttl=TTL)

    def acquire(self) -> int:
        if not self._lock.acquire(timeout=ACQUIRE_TIMEOUT):
            raise TimeoutError("python-etcd3 lock not acquired")
        return -1

    def release(self) -> None:
        self._lock.release()

    def close(self) -> None:
        self._client.close()


@dataclass(frozen=True)
class Contender:
    """One row: ``key`` names the lock; ``target`` is where its servers are."""

    key: str
    target: str

    def locker(self) -> Locker:
        if self.key.startswith("fencelock"):
            return FencelockLocker(self.target)
        if self.key == "kazoo":
            return KazooLocker(self.target)
        return Etcd3Locker(self.target)


# --------------------------------------------------------------------------- scenarios


def uncontended_sync(contender: Contender, seconds: float) -> float:
    locker = contender.locker()
    try:
        for _ in range(20):  # warm up: sessions, connections, the queue node
            locker.acquire()
            locker.release()

        def cycle() -> None:
            locker.acquire()
            locker.release()

        done, elapsed = run_for(cycle, seconds, batch=10, limit=1_000_000)
        return done / elapsed
    finally:
        locker.close()


def uncontended_async(url: str, seconds: float) -> float:
    async def main() -> float:
        async with fencelock.aconnect(url) as client:
            lock = client.lock(NAME + "-async", ttl=TTL)
            for _ in range(20):
                await (await lock.acquire()).release()
            done, started = 0, time.monotonic()
            while (elapsed := time.monotonic() - started) < seconds:
                for _ in range(10):
                    await (await lock.acquire()).release()
                done += 10
            return done / elapsed

    return asyncio.run(main())


@dataclass
class Row:
    backend: str
    lock: str
    uncontended_sync: float
    uncontended_async: float | None
    contended: float
    jain: float
    longest_wait_ms: float
    errors: int
    first_error: str | None


ROUNDS = 3  # uncontended rates: the median of rounds taken in turn, each lock after another


def measure_uncontended(
    entries: list[tuple[Contender, str, str, bool]], args: argparse.Namespace
) -> dict[int, tuple[float, float | None]]:
    """Warm the servers up (a JVM compiles as it goes), then take turns: the median of
    ``ROUNDS`` rates per lock, so neither drift nor order favours one."""
    for contender, *_ in entries:
        uncontended_sync(contender, 1.0 if args.quick else 3.0)
    sync: dict[int, list[float]] = {i: [] for i in range(len(entries))}
    asynchronous: dict[int, list[float]] = {i: [] for i in range(len(entries))}
    for _ in range(ROUNDS):
        for i, (contender, _, _, has_async) in enumerate(entries):
            sync[i].append(uncontended_sync(contender, args.seconds))
            if has_async:
                asynchronous[i].append(uncontended_async(contender.target, args.seconds))
    return {
        i: (
            statistics.median(sync[i]),
            statistics.median(asynchronous[i]) if asynchronous[i] else None,
        )
        for i in sync
    }


def measure_contended(
    contender: Contender, backend: str, lock: str, rates: tuple[float, float | None],
    args: argparse.Namespace,
) -> Row:  # fmt: skip
    reports = run_contended(contender, args.workers, args.hold_ms / 1000, args.seconds)
    summary = summarise(reports, args.workers, args.seconds, tokens=contender.key == "fencelock")
    return Row(
        backend,
        lock,
        rates[0],
        rates[1],
        summary.sections_per_second,
        summary.jain_index,
        float(summary.acquire_wait_ms.get("max", float("nan"))),
        summary.errors + summary.overlaps + summary.token_inversions,
        summary.first_error,
    )


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=1, help="members per cluster (1 or 3)")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--hold-ms", type=float, default=1.0)
    parser.add_argument("--quick", action="store_true", help="1 s per scenario")
    args = parser.parse_args()
    if args.quick:
        args.seconds = 1.0
    console = Console()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp, ServerPool.under(Path(tmp)) as pool:
        zookeeper = pool.zookeeper(args.members)
        etcd = pool.etcd(args.members)
        zk_url, etcd_url = zookeeper[0].url, etcd[0].url
        plan = [
            (Contender("fencelock", zk_url), "zookeeper", "fencelock", True),
            (Contender("kazoo", zk_url.split("//", 1)[1]), "zookeeper", "kazoo Lock", False),
            (Contender("fencelock", etcd_url), "etcd", "fencelock", True),
            (Contender("etcd3", etcd[0].address), "etcd", "python-etcd3 lock", False),
        ]
        entries = []
        for entry in plan:
            contender, backend, lock, _ = entry
            if contender.key != "fencelock" and not installed(contender.key):
                console.print(f"[yellow]skipped {backend} {lock}: {contender.key} not installed[/]")
            else:
                entries.append(entry)
        console.print(f"uncontended: warm-up, then {ROUNDS} rounds in turn ...")
        rates = measure_uncontended(entries, args)
        for i, (contender, backend, lock, _) in enumerate(entries):
            console.print(f"contended: {backend} {lock} ...")
            rows.append(measure_contended(contender, backend, lock, rates[i], args))
    show(console, rows, args)
    save(rows, args)
    return 1 if any(row.errors for row in rows) else 0


def show(console: Console, rows: list[Row], args: argparse.Namespace) -> None:
    table = new_table(
        f"{args.members}-member servers; contended: {args.workers} processes, "
        f"{args.hold_ms:g} ms hold, {args.seconds:g} s",
        ["backend", "lock", "uncontended sync /s", "async /s", "contended CS/s", "Jain",
         "longest wait ms", "errors"],
    )  # fmt: skip
    for row in rows:
        table.add_row(
            row.backend,
            row.lock,
            f"{row.uncontended_sync:,.0f}",
            "-" if row.uncontended_async is None else f"{row.uncontended_async:,.0f}",
            f"{row.contended:,.0f}",
            f"{row.jain:.3f}",
            f"{row.longest_wait_ms:,.1f}",
            str(row.errors),
        )
    console.print(table)
    for row in rows:
        if row.first_error:
            console.print(f"[red]{row.backend} {row.lock}: {row.first_error}[/]")
    for backend in ("zookeeper", "etcd"):
        ours = [r for r in rows if r.backend == backend and r.lock == "fencelock"]
        peers = [r for r in rows if r.backend == backend and r.lock != "fencelock"]
        for a in ours:
            for b in peers:
                async_ratio = (
                    "-" if a.uncontended_async is None
                    else f"{a.uncontended_async / b.uncontended_sync:.2f}x"
                )  # fmt: skip
                if not b.contended:
                    continue
                console.print(
                    f"{backend}: fencelock ÷ {b.lock}: uncontended sync "
                    f"{a.uncontended_sync / b.uncontended_sync:.2f}x, async {async_ratio}, "
                    f"contended {a.contended / b.contended:.2f}x"
                )


def save(rows: list[Row], args: argparse.Namespace) -> None:
    RESULTS_DIR.mkdir(exist_ok=True)
    path = RESULTS_DIR / f"consensus-{time.strftime('%Y%m%d-%H%M%S')}.json"
    rows_json = [asdict(r) for r in rows]
    payload: dict[str, Any] = {"args": vars(args), "python": sys.version, "rows": rows_json}
    path.write_text(json.dumps(clean_json(payload), indent=2))
    print(f"results: {path}")


if __name__ == "__main__":
    sys.exit(main())
