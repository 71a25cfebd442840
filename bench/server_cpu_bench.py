"""The lock server's CPU per lock cycle, fencelock beside each backend's peer.

A fleet's lock throughput is bounded by the lock server's CPU, not the client's. For
each server backend (servers of its own, from ``fencelock.testing``) and its peers:

- ``redis``: one redis-server, beside redis-py's ``Lock``;
- ``redlock``: five redis-servers (the server CPU is the sum over the five), beside
  aioredlock and redlock-py;
- ``etcd``: one member, beside python-etcd3's ``Lock``;
- ``zookeeper``: one standalone server, beside kazoo's ``Lock``;
- ``postgresql`` (the lease table) and ``postgresql-advisory`` (``postgresql+advisory://``,
  session advisory locks): one cluster, beside tooz's PostgreSQL driver;
- ``mysql``: one MariaDB, beside tooz's MySQL driver;

in the scenarios (``--scenarios``):

- ``uncontended``: 1 process, 1 name;
- ``one``: 8 processes on one name (acquire, then release at once);
- ``shared``: 8 processes on 64 names they all share;
- ``carry`` (Redis, etcd, ZooKeeper): 16 processes on 64 shared names: the cycles per
  second one server sustains, the server's CPU seconds per second at that rate, and their
  quotient, the cycles per second one server core carries.

The worker processes (:mod:`harness.fleet`) run fencelock and each peer in turn,
``--rounds`` rounds each, the order rotated every round. Per round, the server's CPU
from the window's start until it has settled after it (python-etcd3's leases expired, a
quiet slice), over every cycle completed: Redis from the server itself (``INFO cpu``),
etcd, ZooKeeper and MariaDB from ``/proc/PID/stat`` (utime + stime, every thread),
PostgreSQL the postmaster's whole process tree from ``/proc``: every live process's
time and the reaped children's (``cutime`` + ``cstime``), so a backend whose connection
closed in the round (tooz opens one per acquire) counts too. The tables show the median
round [min-max] and fencelock ÷ peer per round.

``--check`` (``make bench-check``) runs the uncontended scenario and compares each
fencelock ÷ peer server-CPU ratio with ``bench/server_cpu_baseline.json``: a rise of
more than 15 % is measured again, then fails; ``--save-baseline`` writes the baseline.

``python bench/server_cpu_bench.py`` (~25 min); ``--quick`` (a smoke run, no figures to
quote); ``--backends redis,etcd --scenarios uncontended,carry``. The tables go to the
terminal and to ``bench/results/server-cpu-<timestamp>.md``, every round to the
``.json`` beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")  # python-etcd3

from harness.cli import add_backends, backends, parser
from harness.fleet import Group, Job, Round, Server
from harness.peers import optional, say, version
from harness.results import confirmed_rise, git_state, write_fleet_results
from harness.servers import (
    process_cpu_seconds,
    process_tree_cpu_seconds,
    redis_cpu_seconds,
    server_pool,
)
from harness.sides import PEERS, REDLOCK_NODE_TIMEOUT, Peer

import fencelock
from fencelock.testing import ServerPool
from fencelock.testing.process import ServerProcess

HERE = Path(__file__).parent
BASELINE = HERE / "server_cpu_baseline.json"
ALLOWED_RISE = 0.15
BACKENDS = ("redis", "redlock", "etcd", "zookeeper", "postgresql", "postgresql-advisory", "mysql")
REDLOCK_NODES = 5


@dataclass(frozen=True)
class Scenario:
    key: str
    title: str
    processes: int
    mode: str  # harness.fleet's: "one" or "shared"
    backends: tuple[str, ...] = BACKENDS


SCENARIOS = {
    s.key: s
    for s in (
        Scenario("uncontended", "Uncontended: 1 process, 1 name", 1, "one"),
        Scenario("one", "8 processes on one name", 8, "one"),
        Scenario("shared", "8 processes on 64 shared names", 8, "shared"),
        Scenario(
            "carry",
            "What one server carries: 16 processes on 64 shared names",
            16,
            "shared",
            ("redis", "etcd", "zookeeper"),
        ),
    )
}


# --------------------------------------------------------------------------- the servers


@dataclass
class Target:
    """A backend's server, started: fencelock's URL and its CPU reading."""

    url: str
    server: Server


def start(pool: ServerPool, backend: str, started: dict[str, Target]) -> Target:
    """``backend``'s server (PostgreSQL's cluster serves both of its backends)."""
    if backend == "redis":
        url = pool.redis().url
        return Target(url, Server(redis_cpu_seconds(url)))
    if backend == "redlock":
        nodes = [pool.redis(name=f"redlock-{i}") for i in range(REDLOCK_NODES)]
        readers = [redis_cpu_seconds(node.url) for node in nodes]
        addresses = ",".join(node.address for node in nodes)
        url = f"redlock://{addresses}?timeout={REDLOCK_NODE_TIMEOUT:g}"
        return Target(url, Server(lambda: sum(read() for read in readers)))
    if backend in ("postgresql", "postgresql-advisory"):
        if (other := started.get("postgresql") or started.get("postgresql-advisory")) is None:
            process = pool.postgresql()
            assert process.pid is not None
            other = Target(process.url, Server(partial(process_tree_cpu_seconds, process.pid)))
        url = other.url.replace("postgresql+advisory://", "postgresql://", 1)
        if backend == "postgresql-advisory":
            url = url.replace("postgresql://", "postgresql+advisory://", 1)
        return Target(url, other.server)
    member: ServerProcess
    if backend == "etcd":
        member = pool.etcd(1)[0]
    elif backend == "zookeeper":
        member = pool.zookeeper(1)[0]
    elif backend == "mysql":
        member = pool.mariadb()
    else:
        raise ValueError(backend)
    assert member.pid is not None
    cpu = partial(process_cpu_seconds, member.pid)
    return Target(member.url, Server(cpu, member.url if backend == "etcd" else None))


# --------------------------------------------------------------------------- the run


@dataclass
class Row:
    backend: str
    scenario: str
    processes: int
    mode: str
    peers: list[Peer]
    idle_server_cores: float
    rounds: list[Round] = field(default_factory=list)
    load_average: tuple[float, float, float] = (0.0, 0.0, 0.0)


def available(peer: Peer) -> bool:
    """Whether the peer imports here (tooz's drivers: tooz and the driver's module)."""
    needs = [peer.module] + (["tooz"] if peer.distribution == "tooz" else [])
    return all(optional(module) is not None for module in needs)


def prepare(url: str) -> None:
    """One cycle from here first: the SQL backends make their tables on first use, and
    eight processes making them at once can fail with "relation already exists"."""
    with fencelock.connect(url) as client:
        client.lock("clients/prepare", ttl=30).acquire(timeout=30).release()


def measure(
    backend: str,
    target: Target,
    scenarios: list[Scenario],
    args: argparse.Namespace,
    warmup: float,
) -> list[Row]:
    """The scenarios of one process count on one backend: a warm-up round for each side,
    then the rounds, the sides' order rotated every round."""
    peers = [p for p in PEERS[backend] if available(p)]
    sides = ("fencelock", *(p.key for p in peers))
    processes = scenarios[0].processes
    modes = tuple(s.mode for s in scenarios)
    group = Group(Job(target.url, sides, 0, 0.0, modes), processes, f"server-cpu-{backend}")
    prepare(target.url)
    rows = []
    try:
        group.start()
        target.server.note_baseline()
        idle = target.server.idle_cores()
        for scenario in scenarios:
            row = Row(backend, scenario.key, processes, scenario.mode, peers, idle)
            say(f"{backend}: {scenario.title} ...")
            row.rounds = group.interleaved(
                sides, scenario.mode, args.rounds, args.seconds, warmup, target.server
            )
            row.load_average = os.getloadavg()
            rows.append(row)
    finally:
        group.close()
    return rows


def run(args: argparse.Namespace) -> list[Row]:
    rows: list[Row] = []
    with server_pool() as (pool, _tmp):
        started: dict[str, Target] = {}
        for backend in args.backends:
            wanted = [s for s in args.scenarios if backend in s.backends]
            if not wanted:
                continue
            target = started[backend] = start(pool, backend, started)
            by_processes: dict[int, list[Scenario]] = {}
            for scenario in wanted:
                by_processes.setdefault(scenario.processes, []).append(scenario)
            for n, group in enumerate(by_processes.values()):
                # the first warm-up is longer: a fresh ZooKeeper's JVM compiles as it goes
                warmup = args.warmup and (args.warmup if n else max(args.warmup, 2.0))
                rows += measure(backend, target, group, args, warmup)
    return rows


# --------------------------------------------------------------------------- output


def of(row: Row, side: str, attribute: str) -> list[float]:
    return [getattr(r, attribute) for r in row.rounds if r.side == side]


def server_cores(row: Row, side: str) -> list[float]:
    """The server's CPU seconds per second at the round's rate, the cycles' aftermath
    included (python-etcd3's leases expire after the window)."""
    return [r.rate * r.server_us / 1e6 for r in row.rounds if r.side == side]


def per_core(row: Row, side: str) -> list[float]:
    """Cycles per second per server core: the rate over the server's CPU per second."""
    return [1e6 / r.server_us for r in row.rounds if r.side == side and r.server_us]


def ratios(ours: list[float], theirs: list[float]) -> list[float]:
    """fencelock ÷ peer, round by round."""
    return [a / b for a, b in zip(ours, theirs, strict=False) if b and a == a and b == b]


def spread(values: list[float], spec: str = "{:,.0f}") -> str:
    """median [min-max]."""
    values = [v for v in values if v == v]  # not nan
    if not values:
        return "-"
    median = spec.format(statistics.median(values))
    if len(values) == 1:
        return median
    return f"{median} [{spec.format(min(values))}-{spec.format(max(values))}]"


def cost_table(rows: list[Row]) -> str:
    lines = [
        "| backend | peer | peer's server µs/cycle | fencelock's server µs/cycle "
        "| fencelock ÷ peer | peer cycles/s | fencelock cycles/s | machine busy |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        ours = of(row, "fencelock", "server_us")
        busy = f"{statistics.median(r.machine_busy for r in row.rounds):.0%}"
        for peer in row.peers or [Peer("-", "-", "-", "-")]:
            theirs = of(row, peer.key, "server_us")
            cells = [
                row.backend,
                peer.label,
                spread(theirs),
                spread(ours),
                spread(ratios(ours, theirs), "{:.2f}x"),
                spread(of(row, peer.key, "rate")),
                spread(of(row, "fencelock", "rate")),
                busy,
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def carry_table(rows: list[Row]) -> str:
    lines = [
        "| backend | peer | peer cycles/s | server cores | cycles/s per server core "
        "| fencelock cycles/s | server cores | cycles/s per server core "
        "| fencelock ÷ peer, per server core | machine busy |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        ours = per_core(row, "fencelock")
        busy = f"{statistics.median(r.machine_busy for r in row.rounds):.0%}"
        for peer in row.peers:
            theirs = per_core(row, peer.key)
            cells = [
                row.backend,
                peer.label,
                spread(of(row, peer.key, "rate")),
                spread(server_cores(row, peer.key), "{:.2f}"),
                spread(theirs),
                spread(of(row, "fencelock", "rate")),
                spread(server_cores(row, "fencelock"), "{:.2f}"),
                spread(ours),
                spread(ratios(ours, theirs), "{:.2f}x"),
                busy,
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def tables(rows: list[Row], args: argparse.Namespace) -> str:
    found = []
    for scenario in args.scenarios:
        chosen = [row for row in rows if row.scenario == scenario.key]
        if chosen:
            made = carry_table if scenario.key == "carry" else cost_table
            found.append(f"**{scenario.title}**\n\n{made(chosen)}")
    return "\n\n".join(found)


def notes(rows: list[Row], args: argparse.Namespace) -> list[str]:
    found = [
        f"Median round [min-max] of {args.rounds} interleaved rounds of {args.seconds:g} s "
        "each side; fencelock ÷ peer per round. Server µs/cycle: the server's CPU (user + "
        "system, every process and thread of it) from the window's start until it settled "
        "after it, over every cycle. Redis: INFO cpu (Redlock: the five nodes' sum); etcd, "
        "ZooKeeper, MariaDB: /proc/PID/stat; PostgreSQL: the postmaster's process tree "
        "from /proc, the backends reaped in the round included.",
        "What one server carries: cycles/s in the window, the server's CPU seconds per "
        "second at that rate (server cores: the rate times the server's CPU a cycle, its "
        "aftermath included), and their quotient (cycles/s per server core). With "
        f"16 clients on {os.cpu_count()} shared cores the clients, not the server, bound "
        "the rate: the per-core figure is what one server core would carry at that cost.",
    ]
    for row in rows:
        for r in row.rounds:
            if r.errors:
                found.append(
                    f"{row.backend} {row.scenario} {r.side}: {r.errors} errors; "
                    f"first: {r.first_error}"
                )
            if not r.settled:
                found.append(f"{row.backend} {row.scenario} {r.side}: the server did not settle")
    return found


def versions(rows: list[Row]) -> dict[str, str | None]:
    found: dict[str, str | None] = {
        "python": platform.python_version(),
        "fencelock": fencelock.__version__,
        "git": git_state(),
    }
    for dist in sorted({p.distribution for row in rows for p in row.peers}):
        found[dist] = version(dist)
    return found


def write(
    rows: list[Row], args: argparse.Namespace, started: float, load: tuple[float, ...]
) -> Iterator[Path]:
    settings = {**vars(args), "scenarios": [s.key for s in args.scenarios]}
    document = {
        "benchmark": "server_cpu_bench",
        "settings": settings,
        "rows": [asdict(row) for row in rows],
    }
    sections = [tables(rows, args), "\n".join(notes(rows, args))]
    return write_fleet_results(
        "server-cpu", "server_cpu_bench.py", sections, document, versions(rows), started, load
    )


# --------------------------------------------------------------------------- the check


def uncontended_ratios(rows: list[Row]) -> dict[str, float]:
    """``backend/peer`` -> fencelock ÷ peer server CPU a cycle, the median of the rounds'
    ratios, uncontended, for each steady peer (:class:`Peer`)."""
    found = {}
    for row in rows:
        if row.scenario != "uncontended":
            continue
        ours = of(row, "fencelock", "server_us")
        for peer in row.peers:
            if not peer.steady:
                continue  # shown in the tables, no yardstick for a 15 % check
            if measured := ratios(ours, of(row, peer.key, "server_us")):
                found[f"{row.backend}/{peer.key}"] = statistics.median(measured)
    return found


def risen_over_baseline(rows: list[Row]) -> list[str]:
    """The backends whose server-CPU ratio to a peer rose more than ALLOWED_RISE."""
    if not BASELINE.exists():
        print(f"no {BASELINE.name} yet: take one with --save-baseline on a quiet machine")
    baseline = json.loads(BASELINE.read_text()) if BASELINE.exists() else {}
    risen, measured = [], uncontended_ratios(rows)
    for key in baseline.keys() - measured.keys():
        if key.split("/", 1)[0] in {row.backend for row in rows}:
            print(f"{key}: not measured (is the peer installed? the bench extra has it)")
    for key, now in measured.items():
        if (before := baseline.get(key)) is None:
            print(f"{key}: server CPU {now:.2f}x the peer's, no baseline")
            continue
        change = now / before - 1
        print(f"{key}: server CPU {now:.2f}x the peer's, baseline {before:.2f}x ({change:+.0%})")
        if change > ALLOWED_RISE:
            risen.append(key.split("/", 1)[0])
    return sorted(set(risen), key=BACKENDS.index)


def check(rows: list[Row], args: argparse.Namespace, again: Callable[[], list[Row]]) -> int:
    """1 if a rise over the baseline shows twice (a busy moment is measured again)."""

    def measured_again(risen: list[str]) -> list[str]:
        args.backends = risen
        measured = again()
        print(tables(measured, args))
        return risen_over_baseline(measured)

    what = "the server's CPU a cycle"
    return confirmed_rise(risen_over_baseline(rows), measured_again, ALLOWED_RISE, what)


def main() -> int:
    made = parser(__doc__, "one 1 s round each, no warm-up: a smoke run, no figures to quote")
    add_backends(made, BACKENDS)
    made.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated")
    made.add_argument("--rounds", type=int, default=9, help="rounds each, interleaved")
    made.add_argument("--seconds", type=float, default=1.0, help="one round's window")
    made.add_argument("--warmup", type=float, default=0.5, help="a discarded round's window")
    made.add_argument("--check", action="store_true", help="uncontended, against the baseline")
    made.add_argument("--save-baseline", action="store_true", help="uncontended ratios")
    args = made.parse_args()
    args.backends = backends(made, args.backends, BACKENDS)
    if args.check or args.save_baseline:
        args.scenarios = "uncontended"
    if unknown := set(args.scenarios.split(",")) - set(SCENARIOS):
        made.error(f"no such scenario: {', '.join(sorted(unknown))}")
    args.scenarios = [SCENARIOS[s] for s in SCENARIOS if s in args.scenarios.split(",")]
    if args.quick:
        args.rounds, args.seconds, args.warmup = 1, 1.0, 0.0
    started, load = time.monotonic(), os.getloadavg()
    rows = run(args)
    print(tables(rows, args))
    print("\n".join(notes(rows, args)))
    for path in write(rows, args, started, load):
        print(f"written: {path}")
    if args.save_baseline:
        kept = json.loads(BASELINE.read_text()) if BASELINE.exists() else {}
        # the backends measured replace theirs; the others' stay
        measured = {row.backend for row in rows}
        kept = {k: v for k, v in kept.items() if k.split("/", 1)[0] not in measured}
        BASELINE.write_text(json.dumps(kept | uncontended_ratios(rows), indent=2) + "\n")
        print(f"written: {BASELINE}")
    if args.check:
        return check(rows, args, lambda: run(args))
    return 1 if any(r.errors for row in rows for r in row.rounds) else 0


if __name__ == "__main__":
    sys.exit(main())
