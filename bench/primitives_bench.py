"""Read-write locks, semaphores and election failover: fencelock beside kazoo, in one run.

Run with ``.venv/bin/python bench/primitives_bench.py`` (``--quick``: every phase about
2 s, for a smoke run). It starts its own servers (``fencelock.testing.ServerPool``: a
single ZooKeeper member, etcd, Redis, PostgreSQL; SQLite in a temporary file) and
measures:

1. **Read-write lock on ZooKeeper**: 8 reader processes loop read-acquire, hold 1 ms,
   release; 1 writer process loops write-acquire, hold 1 ms, release, sleep 50 ms; for
   8 s. Reader and writer holds/s, the writer's wait (p50/p99/max: bounded means the
   readers do not starve it), and a clock check that no read hold overlapped a write
   hold. fencelock ``client.rw_lock(name).read()/.write()`` beside kazoo's
   ``ReadLock``/``WriteLock``.
2. **Semaphore, uncontended**: one process, 3 permits, acquire then release at once
   (cycles/s, the median of rounds taken in turn): fencelock ``client.semaphore(name,
   permits=3)`` and kazoo's ``Semaphore(path, max_leases=3)`` on ZooKeeper, and
   fencelock's alone on SQLite and Redis (no peer there).
3. **Election failover**: per backend (sqlite, redis, etcd, zookeeper, postgresql), TTL
   2 s: a leader process campaigns and holds; a candidate process campaigns (blocking);
   the leader is SIGKILLed; the failover is the time from the kill to the candidate's
   ``campaign()`` returning (both read :func:`fencelock.clock.now`, one clock for every
   process on the host). Three times per backend (the candidate leads the next round);
   median and max against the bound TTL + one round trip (the median of 20
   ``client.inspect(name)`` calls).

Ratios are fencelock ÷ kazoo. It prints tables (rich), writes
``bench/results/primitives-<timestamp>.json`` and a Markdown copy of the tables beside
it. The exit status is 1 if a worker hit an error, a read overlapped a write, or a
failover did not happen.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing as mp
import os
import queue
import signal
import statistics
import sys
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from multiprocessing.context import SpawnProcess
from pathlib import Path
from typing import Any

from harness.cli import parser
from harness.lockers import PeerLocker
from harness.peers import say, version
from harness.results import environment, write_results
from harness.rounds import RateResult, Runner, SyncRunner, interleave
from harness.servers import hosts, server_pool
from harness.stats import ratio, summary_ms
from harness.tables import console, fmt_ms, fmt_number, fmt_ratio, fmt_rounds, new_table
from harness.workers import ACQUIRE_TIMEOUT, READY_TIMEOUT, Locker, WorkerReport, run_workers
from rich.table import Table

import fencelock
from fencelock import clock

TTL = 10.0  # read-write lock and semaphore leases (renewed)
RW_NAME = "bench/primitives/rw"
SEM_NAME = "bench/primitives/sem"
ELECTION_NAME = "bench/primitives/election"
KAZOO_ROOT = "/bench-kazoo"
READERS = 8
HOLD = 0.001  # every read and write hold
WRITER_PAUSE = 0.05  # the writer's sleep after each release
PERMITS = 3
ELECTION_TTL = 2.0
RTT_SAMPLES = 20
BATCH = 10  # uncontended cycles between two clock reads
CAMPAIGN_TIMEOUT = 60.0  # a candidate that is never elected fails loudly
QUEUED_TIMEOUT = 2.0  # how long to wait to see the candidate queued before the kill


@dataclass(frozen=True)
class Settings:
    rw_seconds: float
    rounds: int
    round_seconds: float
    warmup_seconds: float
    repeats: int
    quick: bool

    @classmethod
    def from_args(cls, argv: Sequence[str] | None) -> Settings:
        made = parser(__doc__, "every phase about 2 s")
        made.add_argument("--rw-seconds", type=float, default=8.0)
        made.add_argument("--rounds", type=int, default=3, help="semaphore rounds")
        made.add_argument("--round-seconds", type=float, default=2.0)
        made.add_argument("--repeats", type=int, default=3, help="failovers per backend")
        args = made.parse_args(argv)
        if args.quick:
            return cls(2.0, 1, 2.0, 0.3, 1, True)
        return cls(args.rw_seconds, args.rounds, args.round_seconds, 1.0, args.repeats, False)


# --------------------------------------------------------------------------- 1. read-write


class FencelockRW:
    def __init__(self, url: str, write: bool) -> None:
        self._client = fencelock.connect(url)
        rw = self._client.rw_lock(RW_NAME, ttl=TTL)
        self._side = rw.write() if write else rw.read()
        self._hold: fencelock.RWLease | None = None

    def acquire(self) -> int:
        self._hold = self._side.acquire(ACQUIRE_TIMEOUT)
        return self._hold.token

    def release(self) -> None:
        if self._hold is not None:
            self._hold.release()
            self._hold = None

    def close(self) -> None:
        self.release()
        self._client.close()


def kazoo_rw(hosts: str, write: bool) -> Locker:
    from kazoo.client import KazooClient

    client = KazooClient(hosts=hosts, timeout=TTL)
    client.start(30)

    def close() -> None:
        client.stop()
        client.close()

    path, ident = f"{KAZOO_ROOT}/{RW_NAME}", uuid.uuid4().hex
    lock = client.WriteLock(path, ident) if write else client.ReadLock(path, ident)
    return PeerLocker(lock, close, "kazoo read-write lock", timeout=ACQUIRE_TIMEOUT)


@dataclass(frozen=True)
class RWContender:
    """One worker: ``key`` names the lock, ``target`` where its server is, ``write`` its
    side, ``pause`` its sleep after each release."""

    key: str
    target: str
    write: bool
    pause: float

    def locker(self) -> Locker:
        if self.key == "fencelock":
            return FencelockRW(self.target, self.write)
        return kazoo_rw(self.target, self.write)


@dataclass
class RWResult:
    lock: str
    seconds: float
    reader_holds_per_second: float
    reader_holds_per_second_halves: tuple[float, float]  # first and second half of the run
    writer_holds_per_second: float
    writer_wait_ms: dict[str, float | int]
    reader_wait_ms: dict[str, float | int]
    per_reader: list[int]
    overlaps: int
    cpu_cores: float
    errors: int
    first_error: str | None


def overlaps(reads: list[tuple[float, float]], writes: list[tuple[float, float]]) -> int:
    """Read holds that overlapped a write hold (acquire returned .. release called)."""
    found = 0
    for w_start, w_end in writes:
        found += sum(1 for r_start, r_end in reads if r_start < w_end and w_start < r_end)
    return found


def measure_rw(key: str, label: str, target: str, seconds: float) -> RWResult:
    contenders = [RWContender(key, target, False, 0.0) for _ in range(READERS)]
    contenders.append(RWContender(key, target, True, WRITER_PAUSE))
    started: list[float] = []
    reports = run_workers(
        contenders, HOLD, seconds, during=lambda start, _end: started.append(start)
    )
    start_at = started[0] if started else math.nan
    by_role: dict[bool, list[WorkerReport]] = {False: [], True: []}
    for report in reports:
        by_role[contenders[report.index].write].append(report)

    def sections(write: bool) -> list[tuple[float, float, float, float, int]]:
        return [s for r in by_role[write] for s in r.sections]

    def in_window(write: bool, begin: float = 0.0, end: float = 1.0) -> int:
        low, high = start_at + begin * seconds, start_at + end * seconds
        return sum(1 for s in sections(write) if low <= s[1] <= high)

    errors = sum(r.errors for r in reports) + len(contenders) - len(reports)
    first_error = next((r.first_error for r in reports if r.first_error), None)
    if len(reports) < len(contenders):
        first_error = first_error or f"only {len(reports)} of {len(contenders)} reported"
    return RWResult(
        lock=label,
        seconds=seconds,
        reader_holds_per_second=in_window(False) / seconds if reports else math.nan,
        reader_holds_per_second_halves=(
            in_window(False, 0.0, 0.5) / seconds * 2,
            in_window(False, 0.5, 1.0) / seconds * 2,
        ),
        writer_holds_per_second=in_window(True) / seconds if reports else math.nan,
        writer_wait_ms=summary_ms([s[1] - s[0] for s in sections(True)]),
        reader_wait_ms=summary_ms([s[1] - s[0] for s in sections(False)]),
        per_reader=[len(r.sections) for r in by_role[False]],
        overlaps=overlaps(
            [(s[1], s[2]) for s in sections(False)], [(s[1], s[2]) for s in sections(True)]
        ),
        cpu_cores=sum(r.cpu_seconds for r in reports) / seconds,
        errors=errors,
        first_error=first_error,
    )


# --------------------------------------------------------------------------- 2. semaphore


def open_fencelock_semaphore(url: str) -> Runner:
    client = fencelock.connect(url)
    semaphore = client.semaphore(SEM_NAME, permits=PERMITS, ttl=TTL)

    def cycle() -> None:
        semaphore.acquire(ACQUIRE_TIMEOUT).release()

    return SyncRunner(cycle, client.close)


def open_kazoo_semaphore(hosts: str) -> Runner:
    from kazoo.client import KazooClient

    client = KazooClient(hosts=hosts, timeout=TTL)
    client.start(30)
    semaphore = client.Semaphore(f"{KAZOO_ROOT}/{SEM_NAME}", uuid.uuid4().hex, max_leases=PERMITS)

    def cycle() -> None:
        if not semaphore.acquire(timeout=ACQUIRE_TIMEOUT):
            raise TimeoutError("kazoo Semaphore not acquired")
        semaphore.release()

    def close() -> None:
        client.stop()
        client.close()

    return SyncRunner(cycle, close)


@dataclass
class SemaphoreRow:
    backend: str
    label: str
    key: str
    target: str
    open: Callable[[str], Runner]


def measure_semaphores(rows: list[SemaphoreRow], settings: Settings) -> list[RateResult]:
    """A warm-up per row, then interleaved rounds (each row once a round); the median.

    A result's ``group`` is its backend; a row that fails keeps its error."""
    sides = [
        (RateResult(row.key, row.label, row.backend), lambda row=row: row.open(row.target))
        for row in rows
    ]
    return interleave(
        sides, settings.rounds, settings.round_seconds, settings.warmup_seconds, BATCH, catch=True
    )


# --------------------------------------------------------------------------- 3. election


def elector(url: str, events: Any) -> None:
    """One process: connect, say ready, campaign, say won (with the clock and the term),
    then hold until killed (or, bounded, resign)."""
    try:
        client = fencelock.connect(url)
        election = client.election(ELECTION_NAME, ttl=ELECTION_TTL)
        client.inspect(ELECTION_NAME)  # warm up the connection before the campaign
        events.put(("ready", clock.now(), None))
        leadership = election.campaign(timeout=CAMPAIGN_TIMEOUT)
        events.put(("won", clock.now(), leadership.term))
        time.sleep(CAMPAIGN_TIMEOUT * 3)
        leadership.resign()
        client.close()
    except BaseException:
        events.put(("error", clock.now(), traceback.format_exc(limit=4)))


@dataclass
class ElectionResult:
    backend: str
    ttl: float
    round_trip_ms: float = math.nan
    failover_ms: list[float] = field(default_factory=list)
    remaining_at_kill_ms: list[float | None] = field(default_factory=list)
    terms: list[int] = field(default_factory=list)
    error: str | None = None

    @property
    def bound_ms(self) -> float:
        return self.ttl * 1000 + self.round_trip_ms

    @property
    def median_ms(self) -> float:
        return statistics.median(self.failover_ms) if self.failover_ms else math.nan

    @property
    def max_ms(self) -> float:
        return max(self.failover_ms) if self.failover_ms else math.nan


class Elector:
    """A spawned :func:`elector` and its own event queue (a SIGKILL may break a queue
    mid-write; only the dead process's)."""

    def __init__(self, ctx: Any, url: str) -> None:
        self.events = ctx.Queue()
        self.proc: SpawnProcess = ctx.Process(
            target=elector, args=(url, self.events), name="bench-elector", daemon=True
        )
        self.proc.start()

    def expect(self, kind: str, timeout: float) -> tuple[float, Any]:
        try:
            got, at, data = self.events.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"no {kind!r} from the elector within {timeout:g} s") from None
        if got != kind:
            raise RuntimeError(f"elector: {got}: {data}")
        return at, data

    def kill(self) -> None:
        if self.proc.is_alive():
            os.kill(self.proc.pid or 0, signal.SIGKILL)
        self.proc.join(timeout=5)


def wait_queued(client: fencelock.Client, name: str) -> None:
    """Until the backend shows a waiter on ``name`` (or, where it does not count them,
    half a second)."""
    deadline = clock.now() + QUEUED_TIMEOUT
    while clock.now() < deadline:
        info = client.inspect(name)
        if info is None or info.waiters is None:
            time.sleep(0.5)
            return
        if info.waiters >= 1:
            return
        time.sleep(0.02)


def measure_election(backend: str, url: str, repeats: int) -> ElectionResult:
    result = ElectionResult(backend, ELECTION_TTL)
    ctx = mp.get_context("spawn")
    electors: list[Elector] = []
    try:
        with fencelock.connect(url) as client:
            leader = Elector(ctx, url)
            electors.append(leader)
            leader.expect("ready", READY_TIMEOUT)
            leader.expect("won", CAMPAIGN_TIMEOUT)
            rtts = []
            for _ in range(RTT_SAMPLES):
                began = clock.now()
                client.inspect(ELECTION_NAME)
                rtts.append(clock.now() - began)
            result.round_trip_ms = statistics.median(rtts) * 1000
            for _ in range(repeats):
                candidate = Elector(ctx, url)
                electors.append(candidate)
                candidate.expect("ready", READY_TIMEOUT)
                wait_queued(client, ELECTION_NAME)
                info = client.inspect(ELECTION_NAME)
                remaining = None if info is None or info.remaining is None else info.remaining
                killed = clock.now()
                leader.kill()
                won_at, term = candidate.expect("won", ELECTION_TTL * 5 + 10)
                result.failover_ms.append((won_at - killed) * 1000)
                result.remaining_at_kill_ms.append(None if remaining is None else remaining * 1000)
                result.terms.append(term)
                leader = candidate
    except Exception as exc:
        result.error = f"{type(exc).__name__}: {exc}"
    finally:
        for one in electors:
            one.kill()
    return result


# --------------------------------------------------------------------------- output


def rw_table(results: list[RWResult], settings: Settings) -> Table:
    table = new_table(
        f"1. Read-write lock on ZooKeeper (1 member): {READERS} reader processes + 1 writer, "
        f"hold {HOLD * 1000:g} ms, writer sleeps {WRITER_PAUSE * 1000:g} ms between holds, "
        f"{settings.rw_seconds:g} s (waits in ms)",
        ("lock", "reader holds/s", "1st / 2nd half", "writer holds/s", "writer wait p50",
         "p99", "max", "reader wait p50", "p99", "reads per reader", "read/write overlaps",
         "CPU cores", "errors"),
    )  # fmt: skip
    for r in results:
        w, rd = r.writer_wait_ms, r.reader_wait_ms
        table.add_row(
            r.lock, fmt_number(r.reader_holds_per_second, "{:,.0f}"),
            " / ".join(fmt_number(x, "{:,.0f}") for x in r.reader_holds_per_second_halves),
            fmt_number(r.writer_holds_per_second, "{:,.1f}"),
            fmt_ms(w["p50"]), fmt_ms(w["p99"]), fmt_ms(w["max"]),
            fmt_ms(rd["p50"]), fmt_ms(rd["p99"]),
            " ".join(str(n) for n in r.per_reader), str(r.overlaps), f"{r.cpu_cores:.2f}",
            str(r.errors),
        )  # fmt: skip
    return table


def semaphore_table(results: list[RateResult], settings: Settings) -> Table:
    table = new_table(
        f"2. Semaphore ({PERMITS} permits) acquire+release, uncontended, one process "
        f"(median of {settings.rounds} interleaved rounds x {settings.round_seconds:g} s)",
        ("backend", "semaphore", "cycles/s", "ms/cycle", "each round (cycles/s)",
         "÷ kazoo"),
        left=2,
    )  # fmt: skip
    kazoo = next((r.rate for r in results if r.key == "kazoo"), None)
    for r in results:
        table.add_row(
            r.group, r.label, fmt_number(r.rate, "{:,.0f}"),
            fmt_number(1000 / r.rate if r.rate else math.nan, "{:.2f}"),
            fmt_rounds(r.rates) or (r.error or "-"),
            fmt_ratio(ratio(r.rate, kazoo)) if r.group == "zookeeper" else "-",
        )  # fmt: skip
    return table


def election_table(results: list[ElectionResult]) -> Table:
    table = new_table(
        f"3. Election failover after SIGKILL of the leader, TTL {ELECTION_TTL:g} s: kill -> "
        "the candidate's campaign() returns (ms); bound = TTL + one round trip",
        ("backend", "each failover", "median", "max", "leader's TTL left at kill",
         "round trip", "bound", "max ≤ bound", "terms"),
    )  # fmt: skip
    for r in results:
        if r.error and not r.failover_ms:
            table.add_row(r.backend, f"[red]{r.error}[/red]", *["-"] * 7)
            continue
        within = r.max_ms <= r.bound_ms
        table.add_row(
            r.backend, " ".join(f"{x:,.0f}" for x in r.failover_ms),
            f"{r.median_ms:,.0f}", f"{r.max_ms:,.0f}",
            " ".join("-" if x is None else f"{x:,.0f}" for x in r.remaining_at_kill_ms),
            fmt_ms(r.round_trip_ms), f"{r.bound_ms:,.0f}",
            "[green]yes[/green]" if within else "[red]no[/red]",
            " ".join(str(t) for t in r.terms),
        )  # fmt: skip
    return table


@dataclass
class Results:
    rw: list[RWResult] = field(default_factory=list)
    semaphores: list[RateResult] = field(default_factory=list)
    elections: list[ElectionResult] = field(default_factory=list)
    servers: dict[str, str] = field(default_factory=dict)
    load_at_start: tuple[float, float, float] = (0.0, 0.0, 0.0)


def ratio_lines(results: Results) -> list[str]:
    lines = []
    ours = next((r for r in results.rw if r.lock.startswith("fencelock")), None)
    peer = next((r for r in results.rw if r.lock.startswith("kazoo")), None)
    if ours and peer:
        lines.append(
            "read-write lock, fencelock ÷ kazoo: reader holds/s "
            f"{fmt_ratio(ratio(ours.reader_holds_per_second, peer.reader_holds_per_second))}"
            f", writer holds/s "
            f"{fmt_ratio(ratio(ours.writer_holds_per_second, peer.writer_holds_per_second))}"
            f"; writer wait p99 {fmt_ms(ours.writer_wait_ms['p99'])} ms (fencelock), "
            f"{fmt_ms(peer.writer_wait_ms['p99'])} ms (kazoo)"
        )
    sems = {r.key: r.rate for r in results.semaphores if r.group == "zookeeper"}
    if "fencelock" in sems and "kazoo" in sems:
        lines.append(
            "semaphore on ZooKeeper, fencelock ÷ kazoo: "
            f"{fmt_ratio(ratio(sems['fencelock'], sems['kazoo']))}"
        )
    return lines


def decay_notes(results: Results) -> list[str]:
    """Semaphore rows whose rate fell by a fifth or more from the first round to the last."""
    return [
        f"{r.group} {r.label}: {r.rates[0]:,.0f} -> {r.rates[-1]:,.0f} cycles/s from the "
        f"first round to the last ({r.cycles:,} cycles measured, after the warm-up): the "
        "cost grew with the permits taken before"
        for r in results.semaphores
        if len(r.rates) > 1 and r.rates[-1] < 0.8 * r.rates[0]
    ]


def render(results: Results, made: list[Table]) -> None:
    out = console()
    for table in made:
        out.print(table)
    for line in ratio_lines(results):
        out.print(line)
    for note in decay_notes(results):
        out.print(f"[yellow]{note}[/yellow]")
    for r in results.rw:
        if r.first_error:
            out.print(f"[red]{r.lock}: {r.errors} errors; first: {r.first_error}[/red]")
    for s in results.semaphores:
        if s.error:
            out.print(f"[red]{s.group} {s.label}: {s.error}[/red]")
    for e in results.elections:
        if e.error:
            out.print(f"[red]election on {e.backend}: {e.error}[/red]")


def write_json(results: Results, settings: Settings, made: list[Table], elapsed: float) -> Path:
    document = {
        "benchmark": "primitives_bench",
        "seconds": elapsed,
        "settings": asdict(settings),
        "environment": environment(
            servers=results.servers,
            kazoo=version("kazoo"),
            load_average_at_start=results.load_at_start,
        ),
        "rw": [asdict(r) for r in results.rw],
        "semaphores": [
            {**asdict(r), "backend": r.group, "cycles_per_second": r.rate}
            for r in results.semaphores
        ],
        "elections": [
            {**asdict(e), "median_ms": e.median_ms, "max_ms": e.max_ms, "bound_ms": e.bound_ms}
            for e in results.elections
        ],
        "ratios": ratio_lines(results),
        "notes": decay_notes(results),
    }
    return write_results("primitives", document, made)


# --------------------------------------------------------------------------- main


@contextlib.contextmanager
def servers(results: Results) -> Iterator[dict[str, str]]:
    """Every backend's URL (and kazoo's hosts), the servers stopped on the way out."""
    with server_pool("fencelock-primitives-bench-") as (pool, tmp):
        say("starting ZooKeeper, etcd, Redis, PostgreSQL ...")
        zookeeper = pool.zookeeper(1)
        etcd = pool.etcd(1)
        redis = pool.redis()
        pg = pool.postgresql()
        results.servers["postgresql"] = str(pg.sql("SHOW server_version")[0][0])
        yield {
            "zookeeper": zookeeper[0].url,
            "kazoo": hosts(zookeeper[0].url),
            "sqlite": f"sqlite:///{Path(tmp) / 'primitives.db'}",
            "redis": redis.url,
            "etcd": etcd[0].url,
            "postgresql": pg.url,
        }


def main(argv: Sequence[str] | None = None) -> int:
    settings = Settings.from_args(argv)
    results = Results(load_at_start=os.getloadavg())
    started = time.monotonic()
    with servers(results) as urls:
        say(f"1. read-write lock: fencelock, {settings.rw_seconds:g} s ...")
        results.rw.append(
            measure_rw("fencelock", "fencelock rw_lock", urls["zookeeper"], settings.rw_seconds)
        )
        say(f"1. read-write lock: kazoo, {settings.rw_seconds:g} s ...")
        results.rw.append(
            measure_rw("kazoo", "kazoo ReadLock/WriteLock", urls["kazoo"], settings.rw_seconds)
        )
        say(f"2. semaphores: {settings.rounds} rounds x {settings.round_seconds:g} s ...")
        rows = [
            SemaphoreRow("zookeeper", "fencelock semaphore", "fencelock", urls["zookeeper"],
                         open_fencelock_semaphore),
            SemaphoreRow("zookeeper", "kazoo Semaphore", "kazoo", urls["kazoo"],
                         open_kazoo_semaphore),
            SemaphoreRow("sqlite", "fencelock semaphore", "fencelock-sqlite", urls["sqlite"],
                         open_fencelock_semaphore),
            SemaphoreRow("redis", "fencelock semaphore", "fencelock-redis", urls["redis"],
                         open_fencelock_semaphore),
        ]  # fmt: skip
        results.semaphores = measure_semaphores(rows, settings)
        for backend in ("sqlite", "redis", "etcd", "zookeeper", "postgresql"):
            say(f"3. election failover on {backend}, {settings.repeats} times ...")
            results.elections.append(measure_election(backend, urls[backend], settings.repeats))
    made = [
        rw_table(results.rw, settings),
        semaphore_table(results.semaphores, settings),
        election_table(results.elections),
    ]
    render(results, made)
    elapsed = time.monotonic() - started
    path = write_json(results, settings, made, elapsed)
    print(f"results: {path} ({elapsed:.0f} s)")
    failed = any(r.errors or r.overlaps for r in results.rw)
    failed |= any(s.error for s in results.semaphores)
    failed |= any(e.error or len(e.failover_ms) < settings.repeats for e in results.elections)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
