"""What the two benchmarks share: contended worker processes, statistics, tables.

``sqlite_bench.py`` and ``redis_bench.py`` each define their own contenders (a
``key`` and a ``locker()`` made inside the worker process); this module runs them:
N spawned processes loop acquire -> hold -> release from a shared start time, and
report every critical section's timestamps from :func:`fencelock.clock.now`, one
clock for every process on the host.
"""

from __future__ import annotations

import itertools
import math
import multiprocessing as mp
import queue
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.context import SpawnProcess
from pathlib import Path
from typing import Any, Protocol

from rich.table import Table
from rich.text import Text

from fencelock import clock

ACQUIRE_TIMEOUT = 20.0  # a bounded wait: a stuck run fails loudly instead of hanging
READY_TIMEOUT = 60.0  # for 8 spawned interpreters to import and warm up on a slow host
MAX_SECTIONS_PER_WORKER = 200_000
MAX_WORKER_ERRORS = 10
RESULTS_DIR = Path(__file__).resolve().parent / "results"

# one critical section: acquire called, acquired, release called, released, token (-1: none)
Section = tuple[float, float, float, float, int]


# --------------------------------------------------------------------------- uncontended


def run_for(cycle: Callable[[], Any], seconds: float, batch: int, limit: int) -> tuple[int, float]:
    """Run ``cycle`` in batches of ``batch`` until ``seconds`` pass (or ``limit`` cycles).

    Returns (cycles, elapsed). The clock is read once a batch, not once a cycle.
    """
    done = 0
    start = clock.now()
    deadline = start + seconds
    now = start
    while done < limit:
        for _ in range(batch):
            cycle()
        done += batch
        now = clock.now()
        if now >= deadline:
            break
    return done, now - start


# --------------------------------------------------------------------------- workers


class Locker(Protocol):
    def acquire(self) -> int: ...

    def release(self) -> None: ...

    def close(self) -> None: ...


class Contender(Protocol):
    """One row of a contended run; pickled into each worker process."""

    @property
    def key(self) -> str: ...

    def locker(self) -> Locker: ...


@dataclass
class WorkerReport:
    index: int
    sections: list[Section]
    cpu_seconds: float
    errors: int
    first_error: str | None


@dataclass(frozen=True)
class Channels:
    ready: Any  # multiprocessing queues: worker index when set up, then (start, end)
    start: Any
    results: Any


def contended_worker(contender: Contender, index: int, hold: float, channels: Channels) -> None:
    """One contending process; always sends one :class:`WorkerReport`, even on failure."""
    report = WorkerReport(index, [], 0.0, 0, None)
    try:
        run_worker(contender, hold, channels, report)
    except BaseException:  # KeyboardInterrupt too: report, then exit
        report.errors += 1
        report.first_error = report.first_error or traceback.format_exc(limit=4)
    finally:
        channels.results.put(report)


def run_worker(contender: Contender, hold: float, channels: Channels, report: WorkerReport) -> None:
    """Acquire -> hold -> release from the shared start time until the shared end time."""
    locker = contender.locker()
    try:
        locker.acquire()  # warm up (connections, files, threads) before the clock starts
        locker.release()
        channels.ready.put(report.index)
        start_at, end_at = channels.start.get(timeout=READY_TIMEOUT)
        time.sleep(max(start_at - clock.now(), 0.0))
        cpu = time.process_time()
        while clock.now() < end_at and len(report.sections) < MAX_SECTIONS_PER_WORKER:
            try:
                report.sections.append(one_section(locker, hold))
            except Exception as exc:
                report.errors += 1
                report.first_error = report.first_error or f"{type(exc).__name__}: {exc}"
                if report.errors >= MAX_WORKER_ERRORS:
                    break
        report.cpu_seconds = time.process_time() - cpu
    finally:
        locker.close()


def one_section(locker: Locker, hold: float) -> Section:
    called = clock.now()
    token = locker.acquire()
    acquired = clock.now()
    if hold > 0:
        time.sleep(hold)
    releasing = clock.now()
    locker.release()
    return called, acquired, releasing, clock.now(), token


def run_contended(
    contender: Contender,
    workers: int,
    hold: float,
    seconds: float,
    during: Callable[[float, float], None] | None = None,
) -> list[WorkerReport]:
    """Start the workers, release them together, collect every report, leave nothing running.

    ``during(start, end)``, if given, runs in this process once the workers have been
    told when to start: a caller measures what the server did in that window.
    """
    ctx = mp.get_context("spawn")
    channels = Channels(ctx.Queue(), ctx.Queue(), ctx.Queue())
    procs: list[SpawnProcess] = [
        ctx.Process(
            target=contended_worker,
            args=(contender, i, hold, channels),
            name=f"bench-{contender.key}-{i}",
            daemon=True,
        )
        for i in range(workers)
    ]
    reports: list[WorkerReport] = []
    grace = 5.0
    try:
        for proc in procs:
            proc.start()
        if not wait_ready(channels.ready, procs):
            grace = 0.0
            return collect(channels.results, len(procs), clock.now() + 2.0)
        start_at = clock.now() + 0.1
        for _ in procs:
            channels.start.put((start_at, start_at + seconds))
        if during is not None:
            during(start_at, start_at + seconds)
        deadline = start_at + seconds + ACQUIRE_TIMEOUT + 10
        reports = collect(channels.results, len(procs), deadline)
    finally:
        stop(procs, grace)
    return reports


def wait_ready(ready: Any, procs: Sequence[SpawnProcess]) -> bool:
    """True once every worker is set up; False as soon as one died or time ran out."""
    count, deadline = 0, clock.now() + READY_TIMEOUT
    while count < len(procs) and clock.now() < deadline:
        try:
            ready.get(timeout=0.2)
            count += 1
        except queue.Empty:
            if any(proc.exitcode is not None for proc in procs):
                break
    if count < len(procs):
        print(f"error: only {count} of {len(procs)} workers started", file=sys.stderr)
    return count == len(procs)


def collect(results: Any, expected: int, deadline: float) -> list[WorkerReport]:
    """Up to ``expected`` reports, sorted by worker, read before the workers are joined."""
    reports: list[WorkerReport] = []
    try:
        while len(reports) < expected:
            reports.append(results.get(timeout=max(deadline - clock.now(), 0.1)))
    except queue.Empty:
        print(f"error: {expected - len(reports)} workers did not report", file=sys.stderr)
    return sorted(reports, key=lambda report: report.index)


def stop(procs: Sequence[SpawnProcess], grace: float) -> None:
    """Join every worker within ``grace`` seconds in all; terminate the rest."""
    deadline = clock.now() + grace
    for proc in procs:
        proc.join(timeout=max(deadline - clock.now(), 0.0))
    for proc in procs:
        if proc.is_alive():
            print(f"warning: terminating {proc.name}", file=sys.stderr)
            proc.terminate()
            proc.join(timeout=5)


# --------------------------------------------------------------------------- statistics


def percentile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of sorted values (nan when empty)."""
    if not ordered:
        return math.nan
    rank = max(math.ceil(q / 100 * len(ordered)), 1)
    return ordered[rank - 1]


def summary_ms(values: Sequence[float]) -> dict[str, float | int]:
    ordered = sorted(v * 1000 for v in values)
    return {
        "n": len(ordered),
        "mean": statistics.fmean(ordered) if ordered else math.nan,
        "p50": percentile(ordered, 50),
        "p90": percentile(ordered, 90),
        "p99": percentile(ordered, 99),
        "p999": percentile(ordered, 99.9),
        "max": ordered[-1] if ordered else math.nan,
    }


def jain(counts: Sequence[int]) -> float:
    """Jain's fairness index: 1.0 when every worker got the same share, 1/n when one got all."""
    total = sum(counts)
    squares = sum(c * c for c in counts)
    return total * total / (len(counts) * squares) if squares else math.nan


@dataclass
class Summary:
    """What a contended run measured, whatever the lock."""

    workers: int
    seconds: float
    sections_per_second: float
    handoff_ms: dict[str, float | int]
    cross_handoff_ms: dict[str, float | int]
    acquire_wait_ms: dict[str, float | int]
    self_reacquire_fraction: float
    ceiling_per_second: float  # 1 / mean measured hold: no lock can pass more CS/s
    per_worker: list[int]
    jain_index: float
    spread: float  # the largest |count / mean - 1| over the workers
    cpu_cores: float
    overlaps: int
    token_inversions: int
    errors: int
    first_error: str | None


def summarise(reports: list[WorkerReport], workers: int, seconds: float, tokens: bool) -> Summary:
    """Order every critical section by acquire time; each neighbour pair is one handoff.

    ``tokens``: the lock issues fencing tokens, which must increase in that order.
    """
    ordered = sorted(
        ((section, report.index) for report in reports for section in report.sections),
        key=lambda item: item[0][1],
    )
    handoffs, cross = [], []
    self_handoffs = overlaps = inversions = 0
    for (prev, prev_worker), (nxt, nxt_worker) in itertools.pairwise(ordered):
        gap = nxt[1] - prev[2]  # next acquire return - previous release call start
        overlaps += gap < 0
        inversions += tokens and nxt[4] <= prev[4]
        handoffs.append(gap)
        if nxt_worker == prev_worker:
            self_handoffs += 1
        else:
            cross.append(gap)
    holds = [s[2] - s[1] for s, _ in ordered if s[2] > s[1]]
    start = min((s[0] for s, _ in ordered), default=0.0)
    in_window = sum(1 for s, _ in ordered if s[1] <= start + seconds)
    errors = sum(report.errors for report in reports)
    first_error = next((r.first_error for r in reports if r.first_error), None)
    if len(reports) < workers:
        errors += workers - len(reports)
        first_error = first_error or f"only {len(reports)} of {workers} workers reported"
    counts = [len(report.sections) for report in reports]
    mean = statistics.fmean(counts) if counts else 0.0
    return Summary(
        workers=workers,
        seconds=seconds,
        sections_per_second=in_window / seconds,
        handoff_ms=summary_ms(handoffs),
        cross_handoff_ms=summary_ms(cross),
        acquire_wait_ms=summary_ms([s[1] - s[0] for s, _ in ordered]),
        self_reacquire_fraction=self_handoffs / len(handoffs) if handoffs else math.nan,
        ceiling_per_second=1 / statistics.fmean(holds) if holds else math.nan,
        per_worker=counts,
        jain_index=jain(counts),
        spread=max(abs(c / mean - 1) for c in counts) if mean else math.nan,
        cpu_cores=sum(r.cpu_seconds for r in reports) / seconds,
        overlaps=int(overlaps),
        token_inversions=int(inversions),
        errors=errors,
        first_error=first_error,
    )


# --------------------------------------------------------------------------- output


def fmt_ms(value: float | int | None) -> str:
    if value is None or math.isnan(value):
        return "-"
    return f"{value:.3f}" if value < 10 else f"{value:,.1f}"


def fmt_number(value: float, spec: str) -> str:
    return "-" if math.isnan(value) else spec.format(value)


def new_table(title: str, columns: Sequence[str], left: int = 1) -> Table:
    """A table whose first ``left`` columns are text and the rest right-aligned numbers."""
    table = Table(title=title, title_justify="left")
    for i, column in enumerate(columns):
        table.add_column(column, justify="left" if i < left else "right", no_wrap=i < left)
    return table


def table_markdown(table: Table) -> str:
    """A rich table as a Markdown table (title in bold above it), for docs and notes."""

    def plain(cell: object) -> str:
        text = cell.plain if isinstance(cell, Text) else Text.from_markup(str(cell)).plain
        return text.replace("|", "\\|").replace("\n", " ")

    headers = [plain(column.header) for column in table.columns]
    align = ["---:" if column.justify == "right" else "---" for column in table.columns]
    rows = zip(*(list(column.cells) for column in table.columns), strict=True)
    lines = [f"**{plain(table.title or '')}**", "", "| " + " | ".join(headers) + " |"]
    lines.append("|" + "|".join(align) + "|")
    lines += ["| " + " | ".join(plain(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def clean_json(value: Any) -> Any:
    """NaN (an empty sample) becomes null so the JSON stays strict."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: clean_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_json(v) for v in value]
    return value
