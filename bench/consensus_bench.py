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
import os
import sys
import uuid
from dataclasses import asdict, dataclass
from functools import partial

os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")  # python-etcd3

from harness.cli import add_contended, parser
from harness.lockers import FencelockLocker, PeerLocker, afencelock_cycle
from harness.peers import optional, say
from harness.results import write_results
from harness.rounds import (
    AsyncCloser,
    AsyncCycle,
    AsyncRunner,
    Opener,
    RateResult,
    Runner,
    SyncRunner,
    interleave,
)
from harness.servers import hosts, server_pool
from harness.stats import ratio, summarise
from harness.tables import Column, console, fmt_ratio, rows_table
from harness.workers import ACQUIRE_TIMEOUT, Locker, run_contended

import fencelock

TTL = 10
NAME = "bench/consensus"
ROUNDS = 3  # uncontended rates: the median of rounds taken in turn, each lock after another


@dataclass(frozen=True)
class Contender:
    """One row: ``key`` names the lock; ``target`` is where its servers are."""

    key: str
    target: str

    def locker(self) -> Locker:
        if self.key.startswith("fencelock"):
            return FencelockLocker(self.target, NAME, ttl=TTL)
        if self.key == "kazoo":
            from kazoo.client import KazooClient

            client = KazooClient(hosts=self.target, timeout=TTL)
            client.start(30)

            def close() -> None:
                client.stop()
                client.close()

            lock = client.Lock(f"/bench-kazoo/{NAME}", uuid.uuid4().hex)
            return PeerLocker(lock, close, "kazoo Lock", timeout=ACQUIRE_TIMEOUT)
        import etcd3  # type: ignore[import-untyped]

        host, port = self.target.rsplit(":", 1)
        etcd = etcd3.client(host=host, port=int(port))
        lock = etcd.lock(NAME, ttl=TTL)
        return PeerLocker(lock, etcd.close, "python-etcd3 lock", timeout=ACQUIRE_TIMEOUT)

    def runner(self) -> Runner:
        """The uncontended cycle: the worker's locker, acquired and released at once."""
        locker = self.locker()

        def cycle() -> None:
            locker.acquire()
            locker.release()

        return SyncRunner(cycle, locker.close)


def async_runner(url: str) -> Runner:
    async def setup() -> tuple[AsyncCycle, AsyncCloser]:
        client = fencelock.aconnect(url)
        return afencelock_cycle(client.lock(NAME + "-async", ttl=TTL), None), client.aclose

    return AsyncRunner(setup)


# --------------------------------------------------------------------------- scenarios


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


Entry = tuple[Contender, str, str, bool]  # contender, backend, lock, has an asyncio row


def measure_uncontended(
    entries: list[Entry], args: argparse.Namespace
) -> dict[int, tuple[float, float | None]]:
    """Warm the servers up (a JVM compiles as it goes), then take turns: the median of
    ``ROUNDS`` rates per lock, so neither drift nor order favours one."""
    sides: list[tuple[RateResult, Opener]] = []
    found: dict[int, tuple[RateResult, RateResult | None]] = {}
    for i, (contender, backend, lock, has_async) in enumerate(entries):
        sync = RateResult(contender.key, lock, backend)
        sides.append((sync, contender.runner))
        aside = RateResult(contender.key + "-async", lock, backend) if has_async else None
        if aside is not None:
            sides.append((aside, partial(async_runner, contender.target)))
        found[i] = (sync, aside)
    warmup = 1.0 if args.quick else 3.0
    interleave(sides, ROUNDS, args.seconds, warmup=warmup, batch=10)
    return {i: (sync.rate, aside.rate if aside else None) for i, (sync, aside) in found.items()}


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


def main() -> int:
    made = parser(__doc__, "1 s per scenario")
    made.add_argument("--members", type=int, default=1, help="members per cluster (1 or 3)")
    add_contended(made, seconds=5.0)
    args = made.parse_args()
    if args.quick:
        args.seconds = 1.0
    rows: list[Row] = []
    with server_pool() as (pool, _tmp):
        zookeeper = pool.zookeeper(args.members)
        etcd = pool.etcd(args.members)
        zk_url, etcd_url = zookeeper[0].url, etcd[0].url
        plan: list[Entry] = [
            (Contender("fencelock", zk_url), "zookeeper", "fencelock", True),
            (Contender("kazoo", hosts(zk_url)), "zookeeper", "kazoo Lock", False),
            (Contender("fencelock", etcd_url), "etcd", "fencelock", True),
            (Contender("etcd3", etcd[0].address), "etcd", "python-etcd3 lock", False),
        ]
        entries = [e for e in plan if e[0].key == "fencelock" or optional(e[0].key) is not None]
        say(f"uncontended: warm-up, then {ROUNDS} rounds in turn ...")
        rates = measure_uncontended(entries, args)
        for i, (contender, backend, lock, _) in enumerate(entries):
            say(f"contended: {backend} {lock} ...")
            rows.append(measure_contended(contender, backend, lock, rates[i], args))
    show(rows, args)
    document = {"args": vars(args), "python": sys.version, "rows": [asdict(r) for r in rows]}
    print(f"results: {write_results('consensus', document)}")
    return 1 if any(row.errors for row in rows) else 0


def show(rows: list[Row], args: argparse.Namespace) -> None:
    columns: list[Column] = [
        ("backend", lambda r: r.backend),
        ("lock", lambda r: r.lock),
        ("uncontended sync /s", lambda r: f"{r.uncontended_sync:,.0f}"),
        (
            "async /s",
            lambda r: "-" if r.uncontended_async is None else f"{r.uncontended_async:,.0f}",
        ),
        ("contended CS/s", lambda r: f"{r.contended:,.0f}"),
        ("Jain", lambda r: f"{r.jain:.3f}"),
        ("longest wait ms", lambda r: f"{r.longest_wait_ms:,.1f}"),
        ("errors", lambda r: str(r.errors)),
    ]
    title = (
        f"{args.members}-member servers; contended: {args.workers} processes, "
        f"{args.hold_ms:g} ms hold, {args.seconds:g} s"
    )
    out = console()
    out.print(rows_table(title, rows, columns))
    for row in rows:
        if row.first_error:
            out.print(f"[red]{row.backend} {row.lock}: {row.first_error}[/]")
    for backend in ("zookeeper", "etcd"):
        ours = [r for r in rows if r.backend == backend and r.lock == "fencelock"]
        peers = [r for r in rows if r.backend == backend and r.lock != "fencelock"]
        for a in ours:
            for b in peers:
                if not b.contended:
                    continue
                out.print(
                    f"{backend}: fencelock ÷ {b.lock}: uncontended sync "
                    f"{fmt_ratio(ratio(a.uncontended_sync, b.uncontended_sync))}, async "
                    f"{fmt_ratio(ratio(a.uncontended_async, b.uncontended_sync))}, "
                    f"contended {fmt_ratio(ratio(a.contended, b.contended))}"
                )


if __name__ == "__main__":
    sys.exit(main())
