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

import argparse
import importlib
import importlib.metadata
import inspect
import json
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness import (
    ACQUIRE_TIMEOUT,
    RESULTS_DIR,
    Locker,
    Summary,
    WorkerReport,
    clean_json,
    fmt_ms,
    fmt_number,
    new_table,
    run_contended,
    run_for,
    summarise,
)
from rich.console import Console
from rich.table import Table

import fencelock
from fencelock import clock

LOCK_NAME = "bench/one"
TTL = 30.0
BATCH = 50  # uncontended cycles between two clock reads
MAX_UNCONTENDED_CYCLES = 5_000_000
INSTALL_HINT = ".venv/bin/pip install -e '.[bench]'"

Cycle = Callable[[], None]
Closer = Callable[[], None]


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class Settings:
    rounds: int
    round_seconds: float
    workers: int
    contended_seconds: float
    hold: float

    @classmethod
    def from_args(cls, argv: Sequence[str] | None) -> Settings:
        parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
        parser.add_argument("--quick", action="store_true", help="short smoke run (~15 s)")
        parser.add_argument("--workers", type=int, default=8, help="contending processes")
        parser.add_argument("--seconds", type=float, default=6.0, help="contended run length")
        parser.add_argument("--hold-ms", type=float, default=1.0, help="critical section length")
        args = parser.parse_args(argv)
        if args.workers < 2 or args.seconds <= 0 or args.hold_ms < 0:
            parser.error("need --workers >= 2, --seconds > 0 and --hold-ms >= 0")
        if args.quick:
            return cls(1, 0.4, args.workers, 1.5, args.hold_ms / 1000)
        return cls(3, 0.8, args.workers, args.seconds, args.hold_ms / 1000)


def peer_version(module: str) -> str | None:
    """The installed version of a peer library, or None (after saying so) if missing."""
    try:
        importlib.import_module(module)
    except ImportError:
        print(
            f"note: {module!r} is not installed in this venv, so its rows are skipped "
            f"(install the bench extra: {INSTALL_HINT})",
            file=sys.stderr,
        )
        return None
    try:
        return importlib.metadata.version(module)
    except importlib.metadata.PackageNotFoundError:
        return "stdlib"


def filelock_default_poll_interval() -> float:
    """filelock's own default, read from its signature rather than assumed."""
    from filelock import FileLock

    default = inspect.signature(FileLock.__init__).parameters["poll_interval"].default
    return float(default)


def sqlite_url(path: Path) -> str:
    """``sqlite:////abs/path.db`` for an absolute ``path``."""
    return "sqlite:///" + str(path.resolve())


# --------------------------------------------------------------------------- uncontended


@dataclass
class RateResult:
    key: str
    label: str
    rates: list[float] = field(default_factory=list)
    cycles: int = 0

    @property
    def rate(self) -> float:
        return statistics.median(self.rates)

    @property
    def micros(self) -> float:
        return 1e6 / self.rate


def open_fencelock(tmp: Path) -> tuple[Cycle, Closer]:
    client = fencelock.connect(sqlite_url(tmp / "uncontended-fencelock.db"))
    lock = client.lock(LOCK_NAME, ttl=TTL, renew=True)

    def cycle() -> None:
        lock.acquire(timeout=ACQUIRE_TIMEOUT).release()

    return cycle, client.close


def open_raw_sqlite(tmp: Path) -> tuple[Cycle, Closer]:
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

    return cycle, conn.close


def open_filelock(tmp: Path) -> tuple[Cycle, Closer]:
    from filelock import FileLock

    lock = FileLock(str(tmp / "uncontended-filelock.lock"))

    def cycle() -> None:
        lock.acquire()
        lock.release()

    return cycle, lambda: None


def open_flock(tmp: Path) -> tuple[Cycle, Closer]:
    import fcntl

    fd = os.open(tmp / "uncontended-flock.lock", os.O_RDWR | os.O_CREAT, 0o600)

    def cycle() -> None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        fcntl.flock(fd, fcntl.LOCK_UN)

    return cycle, lambda: os.close(fd)


def measure_uncontended(
    tmp: Path, settings: Settings, versions: dict[str, str | None]
) -> list[RateResult]:
    """Interleaved rounds (each contender once per round); the median round counts."""
    openers: list[tuple[str, str, Callable[[Path], tuple[Cycle, Closer]]]] = [
        ("fencelock", "fencelock (sqlite, ttl=30, renew)", open_fencelock),
        ("raw-sqlite", "raw sqlite3 UPSERT + UPDATE", open_raw_sqlite),
        ("filelock", "filelock.FileLock", open_filelock),
        ("flock", "raw fcntl.flock (fd kept open)", open_flock),
    ]
    needs = {"filelock": "filelock", "flock": "fcntl"}
    opened: list[tuple[RateResult, Cycle, Closer]] = []
    try:
        for key, label, opener in openers:
            if key in needs and versions.get(needs[key]) is None:
                continue
            cycle, closer = opener(tmp)
            opened.append((RateResult(key, label), cycle, closer))
            run_for(
                cycle, 0.1, BATCH, MAX_UNCONTENDED_CYCLES
            )  # warm up: files, pages, the renewer thread
        for _ in range(settings.rounds):
            for result, cycle, _closer in opened:
                cycles, elapsed = run_for(
                    cycle, settings.round_seconds, BATCH, MAX_UNCONTENDED_CYCLES
                )
                result.rates.append(cycles / elapsed)
                result.cycles += cycles
    finally:
        for _result, _cycle, closer in opened:
            closer()
    return [result for result, _cycle, _closer in opened]


# --------------------------------------------------------------------------- contended


class FencelockLocker:
    def __init__(self, path: Path, fair: bool) -> None:
        self._client = fencelock.connect(sqlite_url(path))
        fair_option = {"fair": True} if fair else {}  # the keyword is refused where unsupported
        self._lock = self._client.lock(LOCK_NAME, ttl=TTL, renew=True, **fair_option)
        self._lease: fencelock.Lease | None = None

    def acquire(self) -> int:
        self._lease = self._lock.acquire(timeout=ACQUIRE_TIMEOUT)
        return self._lease.token

    def release(self) -> None:
        if self._lease is not None:
            self._lease.release()
            self._lease = None

    def close(self) -> None:
        self.release()
        self._client.close()


class FileLockLocker:
    def __init__(self, path: Path, poll_interval: float | None) -> None:
        from filelock import FileLock

        self._lock = (
            FileLock(str(path))
            if poll_interval is None
            else FileLock(str(path), poll_interval=poll_interval)
        )

    def acquire(self) -> int:
        self._lock.acquire(timeout=ACQUIRE_TIMEOUT)
        return -1

    def release(self) -> None:
        if self._lock.is_locked:
            self._lock.release()

    def close(self) -> None:
        self.release()


class FlockLocker:
    """Blocking ``flock``: the kernel wakes a waiter on unlock; no polling at all."""

    def __init__(self, path: Path) -> None:
        import fcntl

        self._fcntl = fcntl
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)

    def acquire(self) -> int:
        self._fcntl.flock(self._fd, self._fcntl.LOCK_EX)
        return -1

    def release(self) -> None:
        self._fcntl.flock(self._fd, self._fcntl.LOCK_UN)

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
            return FencelockLocker(self.path, fair=self.key == "fencelock-fair")
        if self.key.startswith("filelock"):
            return FileLockLocker(self.path, self.poll_interval)
        return FlockLocker(self.path)


# --------------------------------------------------------------------------- analysis


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
        return bool(client.seam.backend.capabilities.fair)


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
    table = new_table(
        f"1. Uncontended acquire+release, one process, one name "
        f"(median of {settings.rounds} rounds x {settings.round_seconds:g} s)",
        ("lock", "cycles/s", "µs/cycle", "each round (cycles/s)", "fencelock ÷ this"),
    )
    for r in results:
        ratio = f"{ours.rate / r.rate:.2f}x" if ours else "-"
        rounds = " ".join(f"{x:,.0f}" for x in r.rates)
        table.add_row(r.label, f"{r.rate:,.0f}", f"{r.micros:.1f}", rounds, ratio)
    return table


def handoff_table(results: list[ContendedResult], settings: Settings) -> Table:
    table = new_table(
        f"2. Contended: {settings.workers} processes, one name, hold "
        f"{settings.hold * 1000:g} ms, {settings.contended_seconds:g} s each; "
        "handoff = next acquire return - release call start (ms)",
        ("lock", "waiter wakes by", "CS/s", "handoff p50", "p99", "max",
         "to other worker p50", "p99", "max", "handoffs (to other)"),
        left=2,
    )  # fmt: skip
    for c in results:
        h, x = c.handoff_ms, c.cross_handoff_ms
        table.add_row(
            c.label, c.wait, f"{c.sections_per_second:,.0f}",
            fmt_ms(h["p50"]), fmt_ms(h["p99"]), fmt_ms(h["max"]),
            fmt_ms(x["p50"]), fmt_ms(x["p99"]), fmt_ms(x["max"]), f"{h['n']:,} ({x['n']:,})",
        )  # fmt: skip
    return table


def fairness_table(results: list[ContendedResult]) -> Table:
    table = new_table(
        "3. Contended: fairness, acquire() wait (ms), CPU and safety checks",
        ("lock", "sections per worker", "Jain", "spread", "self re-acq", "wait p99",
         "wait max", "CPU cores", "overlaps", "token inv.", "errors"),
        left=2,
    )  # fmt: skip
    for c in results:
        table.add_row(
            c.label, " ".join(str(n) for n in c.per_worker), fmt_number(c.jain_index, "{:.2f}"),
            fmt_number(c.spread, "±{:.0%}"), fmt_number(c.self_reacquire_fraction, "{:.0%}"),
            fmt_ms(c.acquire_wait_ms["p99"]), fmt_ms(c.acquire_wait_ms["max"]),
            f"{c.cpu_cores:.2f}", str(c.overlaps),
            str(c.token_inversions) if c.key.startswith("fencelock") else "n/a", str(c.errors),
        )  # fmt: skip
    return table


def beside_flock_table(results: list[ContendedResult]) -> Table | None:
    """Each lock's rate, worst wait and spread as ratios to the kernel's blocking flock,
    measured in the same run (the only comparison a shared, noisy host allows)."""
    flock = next((c for c in results if c.key == "flock"), None)
    if flock is None:
        return None
    table = new_table(
        "4. Contended, beside fcntl.flock in this run (÷ flock: this row's figure / flock's)",
        ("lock", "CS/s", "÷ flock", "worst wait (ms)", "÷ flock", "spread", "flock's spread"),
    )
    for c in results:
        worst, flock_worst = c.acquire_wait_ms["max"], flock.acquire_wait_ms["max"]
        table.add_row(
            c.label, f"{c.sections_per_second:,.0f}",
            f"{c.sections_per_second / flock.sections_per_second:.2f}x", fmt_ms(worst),
            f"{worst / flock_worst:.1f}x", fmt_number(c.spread, "±{:.0%}"),
            fmt_number(flock.spread, "±{:.0%}"),
        )  # fmt: skip
    return table


def render(
    uncontended: list[RateResult], contended: list[ContendedResult], settings: Settings
) -> None:
    console = Console(width=None if sys.stdout.isatty() else 160)
    console.print(uncontended_table(uncontended, settings))
    if contended:
        console.print(handoff_table(contended, settings))
        console.print(fairness_table(contended))
        beside = beside_flock_table(contended)
        if beside is not None:
            console.print(beside)
    for c in contended:
        if c.first_error:
            last_line = c.first_error.strip().splitlines()[-1]
            console.print(f"[red]{c.label}: {c.errors} errors; first: {last_line}[/red]")


def write_json(
    uncontended: list[RateResult],
    contended: list[ContendedResult],
    settings: Settings,
    versions: dict[str, str | None],
    tmp: Path,
) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = RESULTS_DIR / f"sqlite-{stamp}.json"
    ours = next((r for r in uncontended if r.key == "fencelock"), None)
    document = {
        "benchmark": "sqlite_bench",
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "settings": asdict(settings),
        "environment": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "sqlite": sqlite3.sqlite_version,
            "fencelock": fencelock.__version__,
            "fencelock_source": str(Path(fencelock.__file__).parent),
            "load_average": os.getloadavg(),
            "peers": versions,
            "temp_dir": str(tmp),
        },
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
    path.write_text(json.dumps(clean_json(document), indent=2, allow_nan=False) + "\n")
    return path


# --------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    settings = Settings.from_args(argv)
    versions = {"filelock": peer_version("filelock"), "fcntl": peer_version("fcntl")}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fencelock-bench-") as name:
        tmp = Path(name)
        print(
            f"uncontended: {settings.rounds} rounds x {settings.round_seconds:g} s per lock ...",
            file=sys.stderr,
        )
        uncontended = measure_uncontended(tmp, settings, versions)
        contended = []
        for contender in contenders(tmp, versions):
            print(
                f"contended: {contender.label}, {settings.workers} processes, "
                f"{settings.contended_seconds:g} s ...",
                file=sys.stderr,
            )
            if contender.fencelock:
                fencelock.connect(sqlite_url(contender.path)).close()  # create the schema once
            reports = run_contended(
                contender, settings.workers, settings.hold, settings.contended_seconds
            )
            contended.append(analyse(contender, reports, settings))
        render(uncontended, contended, settings)
        path = write_json(uncontended, contended, settings, versions, tmp)
    print(f"results: {path} ({time.monotonic() - started:.0f} s)")
    failed = any(c.errors or c.overlaps or c.token_inversions for c in contended)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
