"""fencelock's SQLite backend side by side with peer locks on this host.

Run with ``make bench`` or ``.venv/bin/python bench/sqlite_bench.py`` (``--quick`` for a
smoke run). Two measurements, one run:

1. **Uncontended** acquire+release cycles per second in one process on one name:
   fencelock (``ttl=30, renew=True``), py-filelock, a raw ``fcntl.flock`` loop and a raw
   sqlite3 "UPSERT token + UPDATE release" loop (the floor of fencelock's transaction).
2. **Contended**: N processes loop acquire -> hold ~1 ms -> release on one name. The
   handoff latency is the time from one holder's release call start to the next
   holder's acquire return, both read from :func:`fencelock.clock.now` (one clock for
   every process on the host).

It prints tables (rich) and writes ``bench/results/sqlite-<timestamp>.json``. It installs
nothing: a peer library missing from the venv is reported and skipped.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.cli import RunSettings, add_contended, contended_ok, parser
from harness.lockers import FencelockLocker, PeerLocker, acquire_release, fencelock_cycle
from harness.peers import peer_versions, say
from harness.results import environment, write_results
from harness.rounds import RateResult, SyncCycle, SyncRunner, interleave
from harness.servers import terminated_by_sigterm
from harness.stats import Summary, summarise
from harness.tables import (
    FAIRNESS,
    HANDOFF_COUNT,
    HANDOFFS,
    LOCK,
    SAFETY,
    SECTIONS_PER_SECOND,
    SELF_REACQUIRE,
    WAKES,
    Column,
    console,
    fmt_ms,
    fmt_number,
    fmt_ratio,
    fmt_rounds,
    print_errors,
    rows_table,
    waits,
)
from harness.workers import ACQUIRE_TIMEOUT, Locker, WorkerReport, run_contended
from rich.table import Table

import fencelock
from fencelock import clock

LOCK_NAME = "bench/one"
TTL = 30.0
BATCH = 50  # uncontended cycles between two clock reads
PEERS = {"filelock": "filelock", "fcntl": "fcntl"}


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class Settings(RunSettings):
    """The rounds and the contended run."""

    @classmethod
    def from_args(cls, argv: Sequence[str] | None) -> Settings:
        made = parser(__doc__, "short smoke run (~15 s)")
        add_contended(made, seconds=6.0)
        args = made.parse_args(argv)
        contended_ok(made, args)
        if args.quick:
            return cls(1, 0.4, args.workers, 1.5, args.hold_ms / 1000)
        return cls(3, 0.8, args.workers, args.seconds, args.hold_ms / 1000)


def filelock_default_poll_interval() -> float:
    """filelock's own default, read from its signature rather than assumed."""
    import inspect

    from filelock import FileLock

    default = inspect.signature(FileLock.__init__).parameters["poll_interval"].default
    return float(default)


def sqlite_url(path: Path) -> str:
    """``sqlite:////abs/path.db`` for an absolute ``path``."""
    return "sqlite:///" + str(path.resolve())


# --------------------------------------------------------------------------- uncontended


def open_fencelock(tmp: Path) -> SyncRunner:
    client = fencelock.connect(sqlite_url(tmp / "uncontended-fencelock.db"))
    return SyncRunner(fencelock_cycle(client.lock(LOCK_NAME, ttl=TTL, renew=True)), client.close)


def open_raw_sqlite(tmp: Path) -> SyncRunner:
    """The least a lease needs: one UPSERT that issues the token, one UPDATE that frees it."""
    conn = sqlite3.connect(tmp / "uncontended-raw.db", timeout=10.0, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS leases (name TEXT PRIMARY KEY, owner TEXT, "
        "token INTEGER NOT NULL, expires_at REAL NOT NULL) WITHOUT ROWID"
    )
    take = (
        "INSERT INTO leases (name, owner, token, expires_at) VALUES (:name, :owner, 1, :exp) "
        "ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, token = token + 1, "
        "expires_at = excluded.expires_at WHERE owner IS NULL OR expires_at <= :now "
        "RETURNING token"
    )
    free = "UPDATE leases SET owner = NULL, expires_at = 0 WHERE name = :name AND owner = :owner"
    params = {"name": LOCK_NAME, "owner": "bench-owner"}

    def cycle() -> None:
        now = clock.now()
        if conn.execute(take, {**params, "exp": now + TTL, "now": now}).fetchone() is None:
            raise RuntimeError("raw sqlite loop found its own lease still held")
        conn.execute(free, params)

    return SyncRunner(cycle, conn.close)


def open_filelock(tmp: Path) -> SyncRunner:
    from filelock import FileLock

    return SyncRunner(acquire_release(FileLock(str(tmp / "uncontended-filelock.lock"))))


def open_flock(tmp: Path) -> SyncRunner:
    fd = os.open(tmp / "uncontended-flock.lock", os.O_RDWR | os.O_CREAT, 0o600)
    return SyncRunner(FlockLocker.cycle(fd), lambda: os.close(fd))


def measure_uncontended(
    tmp: Path, settings: Settings, versions: dict[str, str | None]
) -> list[RateResult]:
    """Interleaved rounds (each contender once per round); the median round counts."""
    rows = [
        ("fencelock", "fencelock (sqlite, ttl=30, renew)", open_fencelock),
        ("raw-sqlite", "raw sqlite3 UPSERT + UPDATE", open_raw_sqlite),
        ("filelock", "filelock.FileLock", open_filelock),
        ("flock", "raw fcntl.flock (fd kept open)", open_flock),
    ]
    needs = {"filelock": "filelock", "flock": "fcntl"}
    sides = [
        (RateResult(key, label), lambda opener=opener: opener(tmp))
        for key, label, opener in rows
        if key not in needs or versions.get(needs[key]) is not None
    ]
    return interleave(sides, settings.rounds, settings.round_seconds, warmup=0.1, batch=BATCH)


# --------------------------------------------------------------------------- contended


def filelock_locker(path: Path, poll_interval: float | None) -> Locker:
    from filelock import FileLock

    lock = (
        FileLock(str(path))
        if poll_interval is None
        else FileLock(str(path), poll_interval=poll_interval)
    )
    return PeerLocker(lock, lambda: None, "filelock", timeout=ACQUIRE_TIMEOUT)


class FlockLocker:
    """Blocking ``flock``: the kernel wakes a waiter on unlock; no polling at all."""

    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)

    @staticmethod
    def cycle(fd: int) -> SyncCycle:
        """One ``LOCK_EX`` + ``LOCK_UN`` on ``fd``."""

        def cycle() -> None:
            fcntl.flock(fd, fcntl.LOCK_EX)
            fcntl.flock(fd, fcntl.LOCK_UN)

        return cycle

    def acquire(self) -> int:
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        return -1

    def release(self) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        os.close(self._fd)


@dataclass(frozen=True)
class Contender:
    key: str
    label: str
    wait: str  # how a waiter learns the lock is free
    path: Path
    poll_interval: float | None = None

    @property
    def fencelock(self) -> bool:
        return self.key.startswith("fencelock")

    def locker(self) -> Locker:
        if self.fencelock:
            fair = self.key == "fencelock-fair"  # the keyword is refused where unsupported
            url = sqlite_url(self.path)
            return FencelockLocker(url, LOCK_NAME, ttl=TTL, renew=True, fair=fair)
        if self.key.startswith("filelock"):
            return filelock_locker(self.path, self.poll_interval)
        return FlockLocker(self.path)


@dataclass
class ContendedResult(Summary):
    key: str
    label: str
    wait: str


def analyse(
    contender: Contender, reports: list[WorkerReport], settings: Settings
) -> ContendedResult:
    summary = summarise(reports, settings.workers, settings.contended_seconds, contender.fencelock)
    return ContendedResult(
        **vars(summary), key=contender.key, label=contender.label, wait=contender.wait
    )


def supports_fair(tmp: Path) -> bool:
    """Whether this fencelock offers fair=True on sqlite:// (it did not always)."""
    with fencelock.connect(sqlite_url(tmp / "probe.db")) as client:
        return bool(client.internals.backend.capabilities.fair)


def contenders(tmp: Path, versions: dict[str, str | None]) -> list[Contender]:
    found = [
        Contender("fencelock", "fencelock sqlite", "doorbell rung", tmp / "contended-fencelock.db")
    ]
    if supports_fair(tmp):
        found.append(
            Contender(
                "fencelock-fair",
                "fencelock sqlite fair=True",
                "doorbell rung, FIFO",
                tmp / "contended-fencelock-fair.db",
            )
        )
    if versions.get("filelock") is not None:
        default_ms = filelock_default_poll_interval() * 1000
        found += [
            Contender(
                "filelock",
                f"filelock poll {default_ms:g} ms (default)",
                f"sleep {default_ms:g} ms, retry",
                tmp / "contended-filelock.lock",
            ),
            Contender(
                "filelock-1ms",
                "filelock poll 1 ms",
                "sleep 1 ms, retry",
                tmp / "contended-filelock-1ms.lock",
                poll_interval=0.001,
            ),
        ]
    if versions.get("fcntl") is not None:
        found.append(
            Contender(
                "flock", "fcntl.flock blocking", "kernel wake-up", tmp / "contended-flock.lock"
            )
        )
    return found


# --------------------------------------------------------------------------- output


def uncontended_table(results: list[RateResult], settings: Settings) -> Table:
    ours = next((r for r in results if r.key == "fencelock"), None)
    columns: list[Column] = [
        ("lock", lambda r: r.label),
        ("cycles/s", lambda r: f"{r.rate:,.0f}"),
        ("µs/cycle", lambda r: f"{r.micros:.1f}"),
        ("each round (cycles/s)", lambda r: fmt_rounds(r.rates)),
        ("fencelock ÷ this", lambda r: fmt_ratio(ours.rate / r.rate) if ours else "-"),
    ]
    title = (
        f"1. Uncontended acquire+release, one process, one name "
        f"(median of {settings.rounds} rounds x {settings.round_seconds:g} s)"
    )
    return rows_table(title, results, columns)


def handoff_table(results: list[ContendedResult], settings: Settings) -> Table:
    title = (
        f"2. Contended: {settings.workers} processes, one name, hold "
        f"{settings.hold * 1000:g} ms, {settings.contended_seconds:g} s each; "
        "handoff = next acquire return - release call start (ms)"
    )
    columns = [LOCK, WAKES, SECTIONS_PER_SECOND, *HANDOFFS, HANDOFF_COUNT]
    return rows_table(title, results, columns, left=2)


def fairness_table(results: list[ContendedResult]) -> Table:
    title = "3. Contended: fairness, acquire() wait (ms), CPU and safety checks"
    cpu: Column = ("CPU cores", lambda c: f"{c.cpu_cores:.2f}")
    columns = [LOCK, *FAIRNESS, SELF_REACQUIRE, *waits("wait max"), cpu, *SAFETY]
    return rows_table(title, results, columns, left=2)


def beside_flock_table(results: list[ContendedResult]) -> Table | None:
    """Each lock's rate, worst wait and spread as ratios to the kernel's blocking flock,
    measured in the same run (the only comparison a shared, noisy host allows)."""
    flock = next((c for c in results if c.key == "flock"), None)
    if flock is None:
        return None
    worst = flock.acquire_wait_ms["max"]
    columns: list[Column] = [
        LOCK,
        SECTIONS_PER_SECOND,
        ("÷ flock", lambda c: f"{c.sections_per_second / flock.sections_per_second:.2f}x"),
        ("worst wait (ms)", lambda c: fmt_ms(c.acquire_wait_ms["max"])),
        ("÷ flock", lambda c: f"{c.acquire_wait_ms['max'] / worst:.1f}x"),
        ("spread", lambda c: fmt_number(c.spread, "±{:.0%}")),
        ("flock's spread", lambda c: fmt_number(flock.spread, "±{:.0%}")),
    ]
    title = "4. Contended, beside fcntl.flock in this run (÷ flock: this row's figure / flock's)"
    return rows_table(title, results, columns)


def tables(
    uncontended: list[RateResult], contended: list[ContendedResult], settings: Settings
) -> list[Table]:
    made = [uncontended_table(uncontended, settings)]
    if contended:
        made += [handoff_table(contended, settings), fairness_table(contended)]
        beside = beside_flock_table(contended)
        if beside is not None:
            made.append(beside)
    return made


def write_json(
    uncontended: list[RateResult],
    contended: list[ContendedResult],
    settings: Settings,
    versions: dict[str, str | None],
    tmp: Path,
) -> Path:
    ours = next((r for r in uncontended if r.key == "fencelock"), None)
    document = {
        "benchmark": "sqlite_bench",
        "settings": asdict(settings),
        "environment": environment(
            sqlite=sqlite3.sqlite_version, peers=versions, temp_dir=str(tmp)
        ),
        "uncontended": [
            {
                "key": r.key,
                "label": r.label,
                "cycles_per_second": r.rate,
                "micros_per_cycle": r.micros,
                "rounds_cycles_per_second": r.rates,
                "total_cycles": r.cycles,
                "fencelock_ratio": ours.rate / r.rate if ours else None,
            }
            for r in uncontended
        ],
        "contended": [asdict(c) for c in contended],
    }
    return write_results("sqlite", document)


# --------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    settings = Settings.from_args(argv)
    versions = peer_versions(PEERS)
    started = time.monotonic()
    with terminated_by_sigterm(), tempfile.TemporaryDirectory(prefix="fencelock-bench-") as name:
        tmp = Path(name)
        say(f"uncontended: {settings.rounds} rounds x {settings.round_seconds:g} s per lock ...")
        uncontended = measure_uncontended(tmp, settings, versions)
        contended = []
        for contender in contenders(tmp, versions):
            say(
                f"contended: {contender.label}, {settings.workers} processes, "
                f"{settings.contended_seconds:g} s ..."
            )
            if contender.fencelock:
                fencelock.connect(sqlite_url(contender.path)).close()  # create the schema once
            reports = run_contended(
                contender, settings.workers, settings.hold, settings.contended_seconds
            )
            contended.append(analyse(contender, reports, settings))
        out = console(160)
        for table in tables(uncontended, contended, settings):
            out.print(table)
        print_errors(out, [(c.label, c.errors, c.first_error) for c in contended])
        path = write_json(uncontended, contended, settings, versions, tmp)
    print(f"results: {path} ({time.monotonic() - started:.0f} s)")
    failed = any(c.errors or c.overlaps or c.token_inversions for c in contended)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
