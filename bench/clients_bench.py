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
import os
import platform
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")  # python-etcd3

from harness.cli import add_backends, backends, parser
from harness.fleet import MODES as FLEET_MODES
from harness.fleet import Group, Job, Round, Server
from harness.peers import optional, say, version
from harness.results import command, git_state, write_fleet_results
from harness.servers import process_cpu_seconds, server_pool
from harness.sides import PEERS

import fencelock
from fencelock.testing.process import ServerProcess

BACKENDS = ("redis", "etcd", "zookeeper")
MODES = FLEET_MODES[:2]  # many, one
SATURATED = 0.9  # of the machine's CPU time busy in the window: the row is CPU-bound
SETTLE_LIMIT = 20.0


# --------------------------------------------------------------------------- the run


@dataclass
class Row:
    backend: str
    mode: str
    processes: int
    peer: str | None
    idle_server_cores: float
    rounds: list[Round] = field(default_factory=list)
    load_average: tuple[float, float, float] = (0.0, 0.0, 0.0)


def measure(
    backend: str, url: str, server: Server, peer: str | None, processes: int,
    args: argparse.Namespace, warmup: float,
) -> list[Row]:  # fmt: skip
    """Every mode at P processes: a warm-up round each, then the interleaved rounds."""
    sides = ("fencelock", PEERS[backend][0].key) if peer else ("fencelock",)
    job = Job(url, sides, 0, args.hold_ms / 1000, MODES)
    group = Group(job, processes, f"clients-{backend}")
    rows = []
    try:
        group.start()
        server.note_baseline()
        idle = server.idle_cores()
        for mode in MODES:
            row = Row(backend, mode, processes, peer, idle)
            say(f"{backend}: {processes} processes, {mode} name(s) ...")
            row.rounds = group.interleaved(sides, mode, args.rounds, args.seconds, warmup, server)
            for done in row.rounds:
                done.side = "fencelock" if done.side == "fencelock" else "peer"
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
            pid = process.pid
            assert pid is not None
            server = Server(
                partial(process_cpu_seconds, pid),
                process.url if backend == "etcd" else None,
            )
            for n, processes in enumerate(args.processes):
                # the first warm-up is longer: a fresh ZooKeeper's JVM compiles as it goes
                warmup = args.warmup and (args.warmup if n else max(args.warmup, 2.0))
                rows += measure(backend, process.url, server, peer, processes, args, warmup)
    return rows


def peer_label(backend: str) -> str | None:
    """The peer's label, or None (said why) if it cannot be imported here."""
    peer = PEERS[backend][0]
    return peer.label if optional(peer.module) is not None else None


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
    for dist in [PEERS[b][0].distribution for b in backends] + ["hiredis", "grpcio", "protobuf"]:
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
    document = {
        "benchmark": "clients_bench",
        "settings": dict(vars(args)),
        "rows": [asdict(row) for row in rows],
    }
    sections = [table(rows), "\n".join(notes(rows, args))]
    found = versions(args.backends)
    return write_fleet_results(
        "clients", "clients_bench.py", sections, document, found, started, load
    )


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
