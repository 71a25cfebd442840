"""Contended runs: N spawned processes loop acquire -> hold -> release on one lock.

A benchmark defines its contenders (a ``key`` and a ``locker()`` made inside the worker
process); the workers start together at a shared time and report every critical
section's timestamps from :func:`fencelock.clock.now`, one clock for every process on
the host.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.context import SpawnProcess
from typing import Any, Protocol

from fencelock import clock

ACQUIRE_TIMEOUT = 20.0  # a bounded wait: a stuck run fails loudly instead of hanging
READY_TIMEOUT = 60.0  # for 8 spawned interpreters to import and warm up on a slow host
MAX_SECTIONS_PER_WORKER = 200_000
MAX_WORKER_ERRORS = 10

# one critical section: acquire called, acquired, release called, released, token (-1: none)
Section = tuple[float, float, float, float, int]


# --------------------------------------------------------------------------- workers


class Locker(Protocol):
    def acquire(self) -> int: ...

    def release(self) -> None: ...

    def close(self) -> None: ...


class Contender(Protocol):
    """One row of a contended run; pickled into each worker process. A contender with a
    ``pause`` attribute sleeps that long after each release."""

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
        pause: float = getattr(contender, "pause", 0.0)
        cpu = time.process_time()
        while clock.now() < end_at and len(report.sections) < MAX_SECTIONS_PER_WORKER:
            try:
                report.sections.append(one_section(locker, hold))
            except Exception as exc:
                report.errors += 1
                report.first_error = report.first_error or f"{type(exc).__name__}: {exc}"
                if report.errors >= MAX_WORKER_ERRORS:
                    break
            if pause:
                time.sleep(pause)
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
    """``workers`` processes of one contender: see :func:`run_workers`."""
    return run_workers([contender] * workers, hold, seconds, during)


def run_workers(
    contenders: Sequence[Contender],
    hold: float,
    seconds: float,
    during: Callable[[float, float], None] | None = None,
) -> list[WorkerReport]:
    """A worker process per contender: start them, release them together, collect every
    report, leave nothing running.

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
        for i, contender in enumerate(contenders)
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
