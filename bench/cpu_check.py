"""CPU per lock cycle, fencelock beside each backend's native client, and the regression check.

Wall-clock rates on this shared 2-core machine move ±40 % between runs; the CPU a cycle
costs moves far less, and it is what the library controls. For each backend this runs
fencelock's uncontended acquire-and-release and the native way to lock on the same server
(redis-py's ``Lock``, kazoo's ``Lock``, ``fcntl.flock``, ``pg_advisory_lock``,
``GET_LOCK``) in interleaved rounds (A, B, A, B…, ``--rounds`` each, one process, the same
servers) and reports, per cycle: the process's CPU (user + sys, every thread: the client
library's own threads count), for Redis the server's CPU too (``INFO cpu``), and the wall
rate; the median round, with the best and worst beside it.

``python bench/cpu_check.py`` prints the table and writes
``bench/results/cpu_per_cycle.json``; ``--check`` compares fencelock's CPU per cycle (over
the peer's, where there is one: this machine's own drift moves both alike) with
``bench/cpu_baseline.json`` and exits 1 where it rose more than 15 % in two runs (``make
bench-check``; run it before you stop, it is not part of ``make test``);
``--save-baseline`` writes the baseline.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fencelock
from fencelock.testing import ServerPool

HERE = Path(__file__).parent
BASELINE = HERE / "cpu_baseline.json"
RESULTS = HERE / "results" / "cpu_per_cycle.json"
ALLOWED_RISE = 0.15
NAME = "bench/cpu"
BACKENDS = ("memory", "sqlite", "redis", "zookeeper", "etcd", "postgresql", "mysql")

Cycle = Callable[[], None]


@dataclass
class Side:
    """One contender's rounds: CPU and server CPU (µs) and cycles/s, one entry a round."""

    label: str
    cpu_us: list[float] = field(default_factory=list)
    server_us: list[float] = field(default_factory=list)
    rate: list[float] = field(default_factory=list)


@dataclass
class Pairing:
    backend: str
    fencelock: Side
    peer: Side | None


def fencelock_cycle(client: fencelock.Client) -> Cycle:
    lock = client.lock(NAME, ttl=30)

    def cycle() -> None:
        lock.acquire().release()

    return cycle


def round_of(
    cycle: Cycle, seconds: float, server_cpu: Callable[[], float] | None
) -> tuple[float, float, float]:
    """CPU µs a cycle (process), server CPU µs a cycle (or nan), cycles a second."""
    server_before = server_cpu() if server_cpu else 0.0
    cpu_before, wall_before = time.process_time(), time.perf_counter()
    cycles = 0
    while time.perf_counter() - wall_before < seconds:
        for _ in range(20):
            cycle()
        cycles += 20
    cpu, wall = time.process_time() - cpu_before, time.perf_counter() - wall_before
    server = (server_cpu() - server_before) / cycles * 1e6 if server_cpu else float("nan")
    return cpu / cycles * 1e6, server, cycles / wall


def interleaved(
    sides: list[tuple[Side, Cycle]],
    rounds: int,
    seconds: float,
    server_cpu: Callable[[], float] | None,
) -> None:
    for _side, cycle in sides:  # warm: connections open, scripts loaded
        for _ in range(50):
            cycle()
    for _ in range(rounds):
        for side, cycle in sides:
            cpu, server, rate = round_of(cycle, seconds, server_cpu)
            side.cpu_us.append(cpu)
            side.server_us.append(server)
            side.rate.append(rate)


# --------------------------------------------------------------------------- the peers


@contextmanager
def flock_cycle(directory: Path) -> Iterator[Cycle]:
    path = directory / "flock.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)

    def cycle() -> None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        fcntl.flock(fd, fcntl.LOCK_UN)

    try:
        yield cycle
    finally:
        os.close(fd)


def acquire_release(lock: Any) -> Cycle:
    """The cycle of a peer's lock object: ``acquire()`` then ``release()``."""

    def cycle() -> None:
        lock.acquire()
        lock.release()

    return cycle


@contextmanager
def redis_py_cycle(url: str) -> Iterator[Cycle]:
    import redis

    client = redis.Redis.from_url(url)
    try:
        yield acquire_release(client.lock(NAME + "/peer", timeout=30))
    finally:
        client.close()


def redis_server_cpu(url: str) -> Callable[[], float]:
    import redis

    client = redis.Redis.from_url(url)

    def used() -> float:
        info: Any = client.info("cpu")
        return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])

    return used


@contextmanager
def kazoo_cycle(url: str) -> Iterator[Cycle]:
    from kazoo.client import KazooClient

    hosts = url.split("//", 1)[1].split("/", 1)[0].split("?", 1)[0]
    client = KazooClient(hosts=hosts)
    client.start()
    try:
        yield acquire_release(client.Lock("/bench-cpu-kazoo"))
    finally:
        client.stop()
        client.close()


@contextmanager
def pg_advisory_cycle(url: str) -> Iterator[Cycle]:
    import psycopg

    conn = psycopg.connect(url.split("?", 1)[0], autocommit=True)

    def cycle() -> None:
        conn.execute("SELECT pg_advisory_lock(4242)")
        conn.execute("SELECT pg_advisory_unlock(4242)")

    try:
        yield cycle
    finally:
        conn.close()


@contextmanager
def get_lock_cycle(server: Any) -> Iterator[Cycle]:
    conn = server.connect()

    def cycle() -> None:
        with conn.cursor() as cursor:
            cursor.execute("SELECT GET_LOCK('bench/cpu/peer', 10)")
            cursor.execute("SELECT RELEASE_LOCK('bench/cpu/peer')")

    try:
        yield cycle
    finally:
        conn.close()


# --------------------------------------------------------------------------- the run


def run(args: argparse.Namespace) -> list[Pairing]:
    found: list[Pairing] = []
    with tempfile.TemporaryDirectory() as tmp, ServerPool.under(Path(tmp)) as pool:
        wanted = set(args.backends.split(","))
        if unknown := wanted - set(BACKENDS):
            raise SystemExit(
                f"--backends: no such backend {', '.join(sorted(unknown))} "
                f"(one of {', '.join(BACKENDS)})"
            )

        def pair(
            backend: str, url: str, peer: Any, peer_label: str, server_cpu: Any = None
        ) -> None:
            if backend not in wanted:
                return
            print(
                f"{backend}: {args.rounds} interleaved rounds of {args.seconds:g}s ...",
                file=sys.stderr,
            )
            with fencelock.connect(url) as client:
                ours = Side("fencelock")
                sides: list[tuple[Side, Cycle]] = [(ours, fencelock_cycle(client))]
                theirs = None
                with peer as peer_cycle:
                    if peer_cycle is not None:
                        theirs = Side(peer_label)
                        sides.append((theirs, peer_cycle))
                    interleaved(sides, args.rounds, args.seconds, server_cpu)
            found.append(Pairing(backend, ours, theirs))

        pair("memory", "memory://bench", _none(), "")
        pair("sqlite", f"sqlite:///{tmp}/cpu.db", flock_cycle(Path(tmp)), "fcntl.flock")
        if wanted & {"redis"}:
            url = pool.redis().url
            pair("redis", url, redis_py_cycle(url), "redis-py Lock", redis_server_cpu(url))
        if wanted & {"zookeeper"}:
            url = pool.zookeeper(1)[0].url
            pair("zookeeper", url, kazoo_cycle(url), "kazoo Lock")
        if wanted & {"etcd"}:
            pair("etcd", pool.etcd(1)[0].url, _none(), "")
        if wanted & {"postgresql"}:
            server = pool.postgresql()
            pair("postgresql", server.url, pg_advisory_cycle(server.url), "pg_advisory_lock")
        if wanted & {"mysql"}:
            server = pool.mariadb()
            pair("mysql", server.url, get_lock_cycle(server), "GET_LOCK")
    return found


@contextmanager
def _none() -> Iterator[None]:
    yield None


def summary(side: Side) -> dict[str, Any]:
    def spread(values: list[float]) -> dict[str, float]:
        clean = [v for v in values if v == v]  # not nan
        if not clean:
            return {}
        return {"median": statistics.median(clean), "min": min(clean), "max": max(clean)}

    return {
        "label": side.label,
        "cpu_us": spread(side.cpu_us),
        "server_us": spread(side.server_us),
        "rate": spread(side.rate),
    }


def table(found: list[Pairing]) -> str:
    lines = [
        "| backend | fencelock CPU µs/cycle | peer | peer CPU µs/cycle "
        "| CPU ratio (peer ÷ ours) | server CPU µs/cycle (ours, peer) | rate ratio (ours ÷ peer) |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for p in found:
        ours = summary(p.fencelock)
        cpu = ours["cpu_us"]
        row = f"| {p.backend} | {cpu['median']:.0f} ({cpu['min']:.0f}-{cpu['max']:.0f}) |"
        if p.peer is None:
            lines.append(row + " - | - | - | - | - |")
            continue
        theirs = summary(p.peer)
        tcpu = theirs["cpu_us"]
        server = "-"
        if ours["server_us"] and theirs["server_us"]:
            server = f"{ours['server_us']['median']:.0f}, {theirs['server_us']['median']:.0f}"
        rates = [a / b for a, b in zip(p.fencelock.rate, p.peer.rate, strict=True)]
        lines.append(
            row + f" {p.peer.label} | {tcpu['median']:.0f} ({tcpu['min']:.0f}-{tcpu['max']:.0f}) |"
            f" {tcpu['median'] / cpu['median']:.2f}x | {server} |"
            f" {statistics.median(rates):.2f}x ({min(rates):.2f}-{max(rates):.2f}) |"
        )
    return "\n".join(lines)


def measure(p: Pairing) -> tuple[str, float]:
    """What the check compares: fencelock's CPU a cycle over the peer's where there is a
    peer (the machine's own drift, ±15 % between runs here, moves both alike), else the
    CPU a cycle itself (µs)."""
    ours = statistics.median(p.fencelock.cpu_us)
    if p.peer is None:
        return "cpu_us", ours
    return "vs_peer", ours / statistics.median(p.peer.cpu_us)


def risen_over_baseline(found: list[Pairing]) -> list[str]:
    """The backends whose fencelock CPU per cycle rose more than ALLOWED_RISE."""
    baseline = json.loads(BASELINE.read_text())
    risen = []
    for p in found:
        kind, now = measure(p)
        before = baseline.get(p.backend, {}).get(kind)
        if before is None:
            print(f"{p.backend}: no baseline")
            continue
        change = now / before - 1
        print(f"{p.backend}: {kind} {now:.3g}, baseline {before:.3g} ({change:+.0%})")
        if change > ALLOWED_RISE:
            risen.append(p.backend)
    return risen


def check(found: list[Pairing], args: argparse.Namespace) -> int:
    """1 if a rise over the baseline shows twice (a busy moment is measured again)."""
    risen = risen_over_baseline(found)
    if risen:
        print(f"measuring again: {', '.join(risen)}")
        args.backends = ",".join(risen)
        risen = risen_over_baseline(run(args))
    if risen:
        print(f"CPU per cycle rose more than {ALLOWED_RISE:.0%} on: {', '.join(risen)}")
        return 1
    print("no rise over the baseline")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=0.5, help="one round's length")
    parser.add_argument("--check", action="store_true", help="fail on a rise over the baseline")
    parser.add_argument("--save-baseline", action="store_true")
    args = parser.parse_args()
    found = run(args)
    print(table(found))
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            [
                {
                    "backend": p.backend,
                    "fencelock": summary(p.fencelock),
                    "peer": summary(p.peer) if p.peer else None,
                }
                for p in found
            ],
            indent=2,
        )
        + "\n"
    )
    if args.save_baseline:
        saved = {p.backend: dict([measure(p)]) for p in found}
        BASELINE.write_text(json.dumps(saved, indent=2) + "\n")
    return check(found, args) if args.check else 0


if __name__ == "__main__":
    sys.exit(main())
