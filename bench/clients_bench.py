"""Lock cycles per second with 1, 4 and 16 client processes, beside each backend's peer.

For Redis, etcd and ZooKeeper (servers of its own, from ``fencelock.testing``), per
number of processes P and per mode:

- ``many``: each process loops over 16 names of its own (no contention: the server's
  throughput with P clients);
- ``one``: every process on one name, acquire then release at once (hold ~0; or
  ``--hold-ms`` between them, a critical section's length).

P worker processes (spawned, each with one fencelock client and one peer client:
redis-py's ``Lock``, kazoo's ``Lock``, python-etcd3's ``Lock``) run acquire+release
cycles for ``--seconds``; fencelock and the peer take turns, ``--rounds`` each, the
order swapped every round. Per round: the cycles completed in the window, the
processes' CPU, and the server process's CPU (utime + stime from ``/proc/PID/stat``)
from the window's start until the server has done the round's aftermath (python-etcd3
leaves an etcd lease per cycle for the server to expire), per cycle. The table shows the
median round (min-max) and fencelock ÷ peer per pair of rounds.

On a 2-core machine 16 processes saturate the CPU: the rates then measure what a cycle
costs the clients, and the server's CPU per cycle is the figure to quote for the server.

``python bench/clients_bench.py`` (~10 min); ``--quick`` (~2 min smoke run);
``--backends redis,etcd``. The tables go to the terminal and to
``bench/results/clients-<timestamp>.md``, every round to the ``.json`` beside it.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import multiprocessing as mp
import os
import platform
import queue
import statistics
import sys
import threading
import time
import traceback
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from multiprocessing.context import SpawnProcess
from pathlib import Path
from typing import Any, Protocol

os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")  # python-etcd3

from harness.cli import add_backends, backends, parser
from harness.lockers import PeerLocker
from harness.peers import optional, say, version
from harness.results import clean_json, command, git_state, stamped
from harness.servers import hosts, process_cpu_seconds, server_pool
from harness.stats import jain

import fencelock
from fencelock import clock
from fencelock.testing.process import ServerProcess

BACKENDS = ("redis", "etcd", "zookeeper")
MODES = ("many", "one")
NAMES = 16  # names of its own per process in "many"
TTL = 30.0
ETCD_PEER_TTL = 2  # python-etcd3 leaks an etcd lease per cycle; etcd's shortest TTL expires it soon
ACQUIRE_TIMEOUT = 10.0
READY_TIMEOUT = 180.0  # 16 spawned interpreters importing python-etcd3 on 2 busy cores
MAX_ERRORS = 10
SLICE = 0.4  # the server has settled once it spends at most QUIET of a core in a slice
QUIET = 0.05
SETTLE_LIMIT = 20.0
SATURATED = 0.9  # of the machine's CPU time busy in the window: the row is CPU-bound
PEERS = {  # backend -> (label, module, distribution)
    "redis": ("redis-py Lock", "redis", "redis"),
    "etcd": ("python-etcd3 Lock", "etcd3", "etcd3"),
    "zookeeper": ("kazoo Lock", "kazoo", "kazoo"),
}


# ------------------------------------------------------------------------- the lockers


class Lockable(Protocol):
    def acquire(self) -> object: ...

    def release(self) -> None: ...


class Side(Protocol):
    """One library's client in a worker: a lock object per name."""

    def lock(self, name: str) -> Lockable: ...

    def close(self) -> None: ...


class FencelockLock:
    def __init__(self, lock: fencelock.Lock) -> None:
        self._lock = lock
        self._lease: fencelock.Lease | None = None

    def acquire(self) -> None:
        self._lease = self._lock.acquire(timeout=ACQUIRE_TIMEOUT)

    def release(self) -> None:
        if self._lease is not None:
            self._lease.release()


class FencelockSide:
    def __init__(self, url: str) -> None:
        self._client = fencelock.connect(url)

    def lock(self, name: str) -> Lockable:
        return FencelockLock(self._client.lock(name, ttl=TTL))

    def close(self) -> None:
        self._client.close()


def peer_lock(lock: Any, **acquire: float) -> Lockable:
    """A peer's lock object, whose ``acquire`` returns False when it times out."""
    return PeerLocker(lock, lambda: None, "peer lock", **acquire)


class RedisPySide:
    def __init__(self, url: str) -> None:
        import redis

        self._client = redis.Redis.from_url(url)

    def lock(self, name: str) -> Lockable:
        # redis-py's own default: a refused acquire sleeps 0.1 s before it asks again
        lock = self._client.lock(f"peer/{name}", timeout=TTL)
        return peer_lock(lock, blocking_timeout=ACQUIRE_TIMEOUT)

    def close(self) -> None:
        self._client.close()


class KazooSide:
    def __init__(self, url: str) -> None:
        from kazoo.client import KazooClient

        self._client = KazooClient(hosts=hosts(url))
        self._client.start(30)

    def lock(self, name: str) -> Lockable:
        return peer_lock(self._client.Lock(f"/bench-clients/{name}"), timeout=ACQUIRE_TIMEOUT)

    def close(self) -> None:
        self._client.stop()
        self._client.close()


class Etcd3Side:
    def __init__(self, url: str) -> None:
        import etcd3

        host, port = hosts(url).rsplit(":", 1)
        self._client = etcd3.client(host=host, port=int(port))

    def lock(self, name: str) -> Lockable:
        lock = self._client.lock(f"peer/{name}", ttl=ETCD_PEER_TTL)
        return peer_lock(lock, timeout=ACQUIRE_TIMEOUT)

    def close(self) -> None:
        # A watch thread python-etcd3 started for a waiter may still be opening its stream
        # and die on the closed channel with a traceback: the process is ending anyway.
        threading.excepthook = lambda hooked: None
        self._client.close()


def open_side(side: str, backend: str, url: str) -> Side:
    if side == "fencelock":
        return FencelockSide(url)
    peers: dict[str, Callable[[str], Side]] = {
        "redis": RedisPySide,
        "zookeeper": KazooSide,
        "etcd": Etcd3Side,
    }
    return peers[backend](url)


def cycle_for(side: Side, mode: str, index: int, hold: float = 0.0) -> Callable[[], None]:
    """One acquire+release: on the next of the process's own names, or on the shared one
    (held ``hold`` seconds: a critical section's length)."""
    if mode == "one":
        locks = [side.lock("clients/one")]
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
    """What a worker process is given: where the server is, which libraries to run."""

    backend: str
    url: str
    sides: tuple[str, ...]
    index: int
    hold: float = 0.0  # seconds each cycle holds the lock


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
            sides[name] = open_side(name, job.backend, job.url)
            for mode in MODES:
                cycles[name, mode] = cycle_for(sides[name], mode, job.index, job.hold)
                for _ in range(NAMES):  # warm: connections, scripts, parent nodes
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
    address = hosts(url)
    request = urllib.request.Request(f"http://{address}/v3/lease/leases", data=b"{}")
    with urllib.request.urlopen(request, timeout=5) as reply:  # noqa: S310 (an http URL built here)
        return len(json.load(reply).get("leases", []))


@dataclass
class Server:
    """The server under test: its CPU, and whether a round's aftermath is still pending."""

    process: ServerProcess
    backend: str
    baseline_leases: int = 0

    def cpu(self) -> float:
        assert self.process.pid is not None
        return process_cpu_seconds(self.process.pid)

    def pending(self) -> bool:
        return self.backend == "etcd" and etcd_leases(self.process.url) > self.baseline_leases

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
        if self.backend != "etcd":
            return
        count, deadline = etcd_leases(self.process.url), clock.now() + ETCD_PEER_TTL + 10
        while clock.now() < deadline:
            time.sleep(1.0)
            now = etcd_leases(self.process.url)
            if now == count:
                break
            count = now
        self.baseline_leases = count


# --------------------------------------------------------------------------- the run


@dataclass
class Round:
    side: str
    rate: float
    cycles: int
    server_us: float  # server CPU per cycle, the round's aftermath included
    window_server_us: float  # the same, read at the window's end
    client_us: float
    client_cores: float
    server_cores: float
    machine_busy: float  # share of every core's time busy in the window, whoever used it
    jain: float
    settled: bool
    errors: int
    first_error: str | None


@dataclass
class Row:
    backend: str
    mode: str
    processes: int
    peer: str | None
    idle_server_cores: float
    rounds: list[Round] = field(default_factory=list)
    load_average: tuple[float, float, float] = (0.0, 0.0, 0.0)


class Group:
    """P worker processes, each with its clients, for the rounds of one backend and P."""

    def __init__(self, job: Job, processes: int) -> None:
        ctx = mp.get_context("spawn")
        self.results = ctx.Queue()
        self.commands = [ctx.Queue() for _ in range(processes)]
        self.procs: list[SpawnProcess] = [
            ctx.Process(
                target=worker,
                args=(
                    Job(job.backend, job.url, job.sides, i, job.hold),
                    self.commands[i],
                    self.results,
                ),
                name=f"clients-{job.backend}-{i}",
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


def measure(
    backend: str, url: str, server: Server, peer: str | None, processes: int,
    args: argparse.Namespace, warmup: float,
) -> list[Row]:  # fmt: skip
    """Every mode at P processes: a warm-up round each, then the interleaved rounds."""
    sides = ("fencelock", "peer") if peer else ("fencelock",)
    group = Group(Job(backend, url, sides, 0, args.hold_ms / 1000), processes)
    rows = []
    try:
        group.start()
        server.note_baseline()
        server.settle()
        idle_from, idle_wall = server.cpu(), clock.now()
        time.sleep(1.0)
        idle = (server.cpu() - idle_from) / (clock.now() - idle_wall)
        for mode in MODES:
            row = Row(backend, mode, processes, peer, idle)
            say(f"{backend}: {processes} processes, {mode} name(s) ...")
            if warmup:
                for side in sides:
                    group.round(side, mode, warmup, server)
            for r in range(args.rounds):
                for side in sides if r % 2 == 0 else sides[::-1]:
                    row.rounds.append(group.round(side, mode, args.seconds, server))
            row.load_average = os.getloadavg()
            rows.append(row)
    finally:
        group.close()
    return rows


def run(args: argparse.Namespace) -> list[Row]:
    rows: list[Row] = []
    with server_pool() as (pool, _tmp):
        for backend in args.backends:
            process: ServerProcess
            if backend == "redis":
                process = pool.redis()
            elif backend == "etcd":
                process = pool.etcd(1)[0]
            else:
                process = pool.zookeeper(1)[0]
            peer = peer_label(backend)
            server = Server(process, backend)
            for n, processes in enumerate(args.processes):
                # the first warm-up is longer: a fresh ZooKeeper's JVM compiles as it goes
                warmup = args.warmup and (args.warmup if n else max(args.warmup, 2.0))
                rows += measure(backend, process.url, server, peer, processes, args, warmup)
    return rows


def peer_label(backend: str) -> str | None:
    """The peer's label, or None (said why) if it cannot be imported here."""
    label, module, _ = PEERS[backend]
    return label if optional(module) is not None else None


# --------------------------------------------------------------------------- output


def spread(values: list[float], spec: str = "{:,.0f}") -> str:
    values = [v for v in values if v == v]  # not nan
    if not values:
        return "-"
    median = spec.format(statistics.median(values))
    if len(values) == 1:
        return median
    return f"{median} ({spec.format(min(values))}-{spec.format(max(values))})"


def of(row: Row, side: str, attribute: str) -> list[float]:
    return [getattr(r, attribute) for r in row.rounds if r.side == side]


def ratios(row: Row, attribute: str = "rate") -> list[float]:
    """fencelock ÷ peer, each fencelock round over the peer round of its pair."""
    ours, theirs = of(row, "fencelock", attribute), of(row, "peer", attribute)
    return [a / b for a, b in zip(ours, theirs, strict=False) if b]


def saturated(row: Row) -> bool:
    return statistics.median(r.machine_busy for r in row.rounds) >= SATURATED


def table(rows: list[Row]) -> str:
    lines = [
        "| backend | names | processes | fencelock cycles/s | peer | peer cycles/s "
        "| fencelock ÷ peer | server CPU µs/cycle, fencelock | peer "
        "| client CPU µs/cycle, fencelock | peer | Jain, fencelock | peer | machine busy |",
        "| --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: |",
    ]
    for row in rows:
        mark = " *" if saturated(row) else ""
        cells = [
            row.backend,
            row.mode,
            f"{row.processes}{mark}",
            spread(of(row, "fencelock", "rate")),
            row.peer or "-",
            spread(of(row, "peer", "rate")),
            spread(ratios(row), "{:.2f}x"),
            spread(of(row, "fencelock", "server_us")),
            spread(of(row, "peer", "server_us")),
            spread(of(row, "fencelock", "client_us")),
            spread(of(row, "peer", "client_us")),
            spread(of(row, "fencelock", "jain"), "{:.2f}"),
            spread(of(row, "peer", "jain"), "{:.2f}"),
            f"{statistics.median(r.machine_busy for r in row.rounds):.0%}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def notes(rows: list[Row], args: argparse.Namespace) -> list[str]:
    found = [
        f"Median round (min-max) of {args.rounds} interleaved rounds of {args.seconds:g} s; "
        "fencelock ÷ peer per pair of rounds. Server CPU per cycle: the server process's "
        "utime + stime from the window's start until it settled, over every cycle.",
        f"* CPU-bound: the machine's {os.cpu_count()} cores were {SATURATED:.0%} or more "
        "busy in the median round (machine busy: /proc/stat, every process, the clients, "
        "the server and anything else running), so the rates measure what a cycle costs "
        "the clients on a full machine; the server's CPU per cycle is the server-side "
        "figure.",
    ]
    for row in rows:
        for r in row.rounds:
            if r.errors:
                found.append(
                    f"{row.backend} {row.mode} P={row.processes} {r.side}: {r.errors} errors; "
                    f"first: {r.first_error}"
                )
            if not r.settled:
                found.append(
                    f"{row.backend} {row.mode} P={row.processes} {r.side}: the server did not "
                    f"settle within {SETTLE_LIMIT:g} s"
                )
    return found


def versions(backends: list[str]) -> dict[str, str | None]:
    found: dict[str, str | None] = {
        "python": platform.python_version(),
        "fencelock": fencelock.__version__,
        "git": git_state(),
    }
    # the peers, and what their speed rests on (redis-py parses with hiredis if present)
    for dist in [PEERS[b][2] for b in backends] + ["hiredis", "grpcio", "protobuf"]:
        if (installed := version(dist)) is not None:
            found[dist] = installed
    if "redis" in backends:
        found["redis-server"] = command("redis-server", "--version")
    if "etcd" in backends:
        found["etcd"] = (command("etcd", "--version") or "").split("\n", 1)[0]
    if "zookeeper" in backends:
        jars = sorted(Path("/usr/share/java").glob("zookeeper-[0-9]*.jar"))
        found["zookeeper"] = jars[-1].stem if jars else None
    return found


def write(
    rows: list[Row], args: argparse.Namespace, started: float, load: tuple[float, ...]
) -> Iterator[Path]:
    markdown = stamped("clients", ".md")
    found = versions(args.backends)
    heading = (
        f"clients_bench.py, {time.strftime('%Y-%m-%d')}, commit {found['git']}, "
        f"{os.cpu_count()} cores, load average {' '.join(f'{x:.2f}' for x in load)} at the "
        f"start, {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end, "
        f"{time.monotonic() - started:.0f} s"
    )
    text = "\n\n".join(
        [heading, table(rows), "\n".join(notes(rows, args)), json.dumps(found)]
    )  # fmt: skip
    markdown.write_text(text + "\n")
    yield markdown
    document = {
        "benchmark": "clients_bench",
        "settings": {k: v for k, v in vars(args).items()},
        "environment": {
            **found,
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "load_average_at_start": load,
            "load_average_at_end": os.getloadavg(),
        },
        "rows": [asdict(row) for row in rows],
    }
    path = markdown.with_suffix(".json")
    path.write_text(json.dumps(clean_json(document), indent=2) + "\n")
    yield path


def main() -> int:
    made = parser(__doc__, "one 1 s round each, no warm-up")
    add_backends(made, BACKENDS)
    made.add_argument("--processes", default="1,4,16")
    made.add_argument("--rounds", type=int, default=3, help="rounds each, interleaved")
    made.add_argument("--seconds", type=float, default=3.0, help="one round's window")
    made.add_argument("--warmup", type=float, default=0.5, help="a discarded round's window")
    made.add_argument("--hold-ms", type=float, default=0.0, help="each cycle holds the lock")
    args = made.parse_args()
    args.backends = backends(made, args.backends, BACKENDS)
    args.processes = [int(p) for p in args.processes.split(",")]
    if args.quick:
        args.rounds, args.seconds, args.warmup = 1, 1.0, 0.0
    started, load = time.monotonic(), os.getloadavg()
    rows = run(args)
    print(table(rows))
    print("\n".join(notes(rows, args)))
    for path in write(rows, args, started, load):
        print(f"written: {path}")
    return 1 if any(r.errors for row in rows for r in row.rounds) else 0


if __name__ == "__main__":
    sys.exit(main())
