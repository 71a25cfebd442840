"""A fleet of client processes in interleaved rounds, and the server's CPU for each round.

P spawned worker processes each open one client per side (fencelock's, a peer's:
:mod:`harness.sides`) and, told a side, a mode and a window, loop acquire+release
until the window ends. Modes: ``many`` (16 names of the process's own: no contention),
``one`` (every process on one name) and ``shared`` (64 names every process shares, each
process taking them in an order of its own). The parent reads the server's CPU
(:class:`Server`: any ``cpu()`` in seconds so far) at the window's start and once the
server has settled after it, and the machine's busy share during the window.
"""

from __future__ import annotations

import contextlib
import http.client
import itertools
import json
import multiprocessing as mp
import queue
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.context import SpawnProcess
from pathlib import Path
from typing import Any

from fencelock import clock
from harness.servers import hosts
from harness.sides import ACQUIRE_TIMEOUT, ETCD_PEER_TTL, Side, open_side
from harness.stats import jain

MODES = ("many", "one", "shared")
NAMES = 16  # names of its own per process in "many"
SHARED_NAMES = 64  # names every process shares in "shared"
WARM_CYCLES = {"many": NAMES, "one": 1, "shared": SHARED_NAMES}
READY_TIMEOUT = 180.0  # 16 spawned interpreters importing python-etcd3 on 2 busy cores
MAX_ERRORS = 10
SLICE = 0.4  # the server has settled once it spends at most QUIET of a core in a slice
QUIET = 0.05
SETTLE_LIMIT = 20.0


def cycle_for(side: Side, mode: str, index: int, hold: float = 0.0) -> Callable[[], None]:
    """One acquire+release: on the next of the process's own names, on the shared one
    (held ``hold`` seconds: a critical section's length), or on the next of the shared
    names."""
    if mode == "one":
        locks = [side.lock("clients/one")]
    elif mode == "shared":
        # an order of its own: an odd stride (index-dependent) from an offset of its own
        stride, offset = 2 * index + 1, 8 * index
        names = [
            f"clients/shared/{(offset + n * stride) % SHARED_NAMES}" for n in range(SHARED_NAMES)
        ]
        locks = [side.lock(name) for name in names]
    else:
        locks, hold = [side.lock(f"clients/{index}/{n}") for n in range(NAMES)], 0.0
    turn = itertools.cycle(locks)

    def cycle() -> None:
        lock = next(turn)
        lock.acquire()
        if hold:
            time.sleep(hold)
        lock.release()

    return cycle


# --------------------------------------------------------------------------- workers


@dataclass(frozen=True)
class Job:
    """What a worker process is given: where the server is, which libraries and modes."""

    url: str
    sides: tuple[str, ...]  # "fencelock" and peers' keys (harness.sides.PEERS)
    index: int
    hold: float = 0.0  # seconds each cycle holds the lock
    modes: tuple[str, ...] = MODES


@dataclass
class Tally:
    """One worker's round."""

    in_window: int = 0  # cycles completed inside the window
    cycles: int = 0  # cycles completed, the ones finishing after it included
    cpu_seconds: float = 0.0
    errors: int = 0
    first_error: str | None = None


def worker(job: Job, commands: Any, results: Any) -> None:
    """Set up every side's cycles, say so, then run the rounds it is sent until None."""
    sides: dict[str, Side] = {}
    try:
        cycles = {}
        for name in job.sides:
            sides[name] = open_side(name, job.url)
            for mode in job.modes:
                cycles[name, mode] = cycle_for(sides[name], mode, job.index, job.hold)
                # warm: connections, scripts, parent nodes, rows (one name: once, since
                # the peers that poll can starve a process of it for long)
                for _ in range(WARM_CYCLES[mode]):
                    cycles[name, mode]()
        results.put(("ready", job.index, None))
        while (command := commands.get()) is not None:
            side, mode, start_at, end_at = command
            results.put(("round", job.index, run_round(cycles[side, mode], start_at, end_at)))
    except BaseException:
        results.put(("failed", job.index, traceback.format_exc(limit=6)))
    finally:
        for opened in sides.values():
            with contextlib.suppress(Exception):
                opened.close()


def run_round(cycle: Callable[[], None], start_at: float, end_at: float) -> Tally:
    tally = Tally()
    time.sleep(max(start_at - clock.now(), 0.0))
    cpu = time.process_time()
    while clock.now() < end_at and tally.errors < MAX_ERRORS:
        try:
            cycle()
        except Exception as exc:
            tally.errors += 1
            tally.first_error = tally.first_error or f"{type(exc).__name__}: {exc}"
            continue
        tally.cycles += 1
        tally.in_window += clock.now() <= end_at
    tally.cpu_seconds = time.process_time() - cpu
    return tally


# --------------------------------------------------------------------------- the server


def machine_times() -> tuple[int, int]:
    """The machine's CPU time so far, (busy, total) in ticks: every core, every process."""
    ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = ticks[3] + ticks[4]  # idle, iowait
    return sum(ticks) - idle, sum(ticks)


def etcd_leases(url: str) -> int:
    host, port = hosts(url).split(",", 1)[0].rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        connection.request("POST", "/v3/lease/leases", body=b"{}")
        return len(json.load(connection.getresponse()).get("leases", []))
    finally:
        connection.close()


@dataclass
class Server:
    """The server under test: its CPU in seconds so far (``cpu``: every process of it),
    and, on etcd (``etcd_url``), whether a round's aftermath is still pending."""

    cpu: Callable[[], float]
    etcd_url: str | None = None
    baseline_leases: int = 0

    def pending(self) -> bool:
        return self.etcd_url is not None and etcd_leases(self.etcd_url) > self.baseline_leases

    def settle(self) -> tuple[float, bool]:
        """The server's CPU once it is done with the last round (nothing pending, then a
        quiet slice: the reading at that slice's start), and whether it got there."""
        deadline = clock.now() + SETTLE_LIMIT
        while clock.now() < deadline:
            if self.pending():
                time.sleep(SLICE)
                continue
            before = self.cpu()
            time.sleep(SLICE)
            if self.cpu() - before <= QUIET * SLICE:
                return before, True
        return self.cpu(), False

    def note_baseline(self) -> None:
        """etcd: the leases the clients keep (fencelock's sessions), once the warm-ups'
        python-etcd3 leases are gone: fewer than before, unchanged for a second."""
        if self.etcd_url is None:
            return
        count, deadline = etcd_leases(self.etcd_url), clock.now() + ETCD_PEER_TTL + 10
        while clock.now() < deadline:
            time.sleep(1.0)
            now = etcd_leases(self.etcd_url)
            if now == count:
                break
            count = now
        self.baseline_leases = count

    def idle_cores(self) -> float:
        """The server's CPU per second with the clients connected and idle (1 s)."""
        self.settle()
        idle_from, idle_wall = self.cpu(), clock.now()
        time.sleep(1.0)
        return (self.cpu() - idle_from) / (clock.now() - idle_wall)


# --------------------------------------------------------------------------- a round


@dataclass
class Round:
    side: str
    rate: float
    cycles: int
    server_us: float  # server CPU per cycle, the round's aftermath included
    window_server_us: float  # the same, read at the window's end
    client_us: float
    client_cores: float
    server_cores: float  # the server's CPU seconds per second in the window
    machine_busy: float  # share of every core's time busy in the window, whoever used it
    jain: float
    settled: bool
    errors: int
    first_error: str | None


class Group:
    """P worker processes, each with its clients, for the rounds of one server and P."""

    def __init__(self, job: Job, processes: int, label: str = "clients") -> None:
        ctx = mp.get_context("spawn")
        self.results = ctx.Queue()
        self.commands = [ctx.Queue() for _ in range(processes)]
        self.procs: list[SpawnProcess] = [
            ctx.Process(
                target=worker,
                args=(
                    Job(job.url, job.sides, i, job.hold, job.modes),
                    self.commands[i],
                    self.results,
                ),
                name=f"{label}-{i}",
                daemon=True,
            )
            for i in range(processes)
        ]

    def start(self) -> None:
        for proc in self.procs:
            proc.start()
        for _ in self.procs:
            self.answer(clock.now() + READY_TIMEOUT)

    def answer(self, deadline: float) -> Any:
        try:
            kind, index, payload = self.results.get(timeout=max(deadline - clock.now(), 0.1))
        except queue.Empty:
            raise RuntimeError("a worker did not answer in time") from None
        if kind == "failed":
            raise RuntimeError(f"worker {index} failed:\n{payload}")
        return payload

    def interleaved(
        self,
        sides: Sequence[str],
        mode: str,
        rounds: int,
        seconds: float,
        warmup: float,
        server: Server,
    ) -> list[Round]:
        """A discarded warm-up round of ``warmup`` seconds for each side (none if 0),
        then ``rounds`` rounds of each, the sides' order rotated every round."""
        if warmup:
            for side in sides:
                self.round(side, mode, warmup, server)
        done = []
        for r in range(rounds):
            turn = r % len(sides)
            for side in [*sides[turn:], *sides[:turn]]:
                done.append(self.round(side, mode, seconds, server))
        return done

    def round(self, side: str, mode: str, seconds: float, server: Server) -> Round:
        start_at = clock.now() + 0.2
        end_at = start_at + seconds
        for commands in self.commands:
            commands.put((side, mode, start_at, end_at))
        time.sleep(max(start_at - 0.005 - clock.now(), 0.0))
        server_start, machine_start = server.cpu(), machine_times()
        time.sleep(max(end_at - clock.now(), 0.0))
        server_window = server.cpu() - server_start
        busy, total = (b - a for a, b in zip(machine_start, machine_times(), strict=True))
        tallies = [self.answer(end_at + ACQUIRE_TIMEOUT * MAX_ERRORS + 30) for _ in self.commands]
        server_end, settled = server.settle()
        cycles = sum(t.cycles for t in tallies)
        cpu = sum(t.cpu_seconds for t in tallies)
        per_cycle = 1e6 / cycles if cycles else float("nan")
        return Round(
            side=side,
            rate=sum(t.in_window for t in tallies) / seconds,
            cycles=cycles,
            server_us=(server_end - server_start) * per_cycle,
            window_server_us=server_window / max(sum(t.in_window for t in tallies), 1) * 1e6,
            client_us=cpu * per_cycle,
            client_cores=cpu / seconds,
            server_cores=server_window / seconds,
            machine_busy=busy / total if total else float("nan"),
            jain=jain([t.in_window for t in tallies]),
            settled=settled,
            errors=sum(t.errors for t in tallies),
            first_error=next((t.first_error for t in tallies if t.first_error), None),
        )

    def close(self) -> None:
        for commands in self.commands:
            commands.put(None)
        deadline = clock.now() + 10
        for proc in self.procs:
            proc.join(timeout=max(deadline - clock.now(), 0.1))
            if proc.is_alive():
                proc.terminate()
                proc.join(5)
