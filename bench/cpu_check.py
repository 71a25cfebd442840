"""CPU per lock cycle, fencelock beside each backend's native client, and the regression check.

Wall-clock rates on this shared 2-core machine move ±40 % between runs; the CPU a cycle
costs moves far less, and it is what the library controls. For each backend this runs
fencelock's uncontended acquire-and-release and the native way to lock on the same server
(a bare dict lock in-process, ``fcntl.flock``, redis-py's ``Lock``, kazoo's ``Lock``,
a bare put and delete through etcd's gateway, ``pg_advisory_lock``, ``GET_LOCK``) in
interleaved rounds (A, B, A, B…, ``--rounds`` each, one process, the same
servers) and reports, per cycle: the process's CPU (user + sys, every thread: the client
library's own threads count), for Redis the server's CPU too (``INFO cpu``), and the wall
rate; the median round, with the best and worst beside it.

``python bench/cpu_check.py`` prints the table and writes
``bench/results/cpu_per_cycle.json``; ``--check`` compares fencelock's CPU per cycle over
the peer's (this machine's own drift moves both alike) with
``bench/cpu_baseline.json`` and exits 1 where it rose more than 15 % in two runs (``make
bench-check``; run it before you stop, it is not part of ``make test``);
``--save-baseline`` writes the baseline of the backends measured (the others' stay).
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import http.client
import json
import os
import secrets
import statistics
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from harness.cli import add_backends, add_rounds, backends, parser
from harness.lockers import acquire_release, fencelock_cycle
from harness.peers import say
from harness.results import RESULTS_DIR, confirmed_rise
from harness.rounds import Opener, RateResult, SyncRunner, interleave
from harness.servers import BACKENDS, backend_url, hosts, server_pool
from harness.sides import BareSide, bare_advisory, bare_get_lock

import fencelock

HERE = Path(__file__).parent
BASELINE = HERE / "cpu_baseline.json"
RESULTS = RESULTS_DIR / "cpu_per_cycle.json"
ALLOWED_RISE = 0.15
NAME = "bench/cpu"


@dataclass
class Pairing:
    backend: str
    fencelock: RateResult
    peer: RateResult


def fencelock_runner(url: str) -> SyncRunner:
    client = fencelock.connect(url)
    return SyncRunner(fencelock_cycle(client.lock(NAME, ttl=30), None), client.close)


# --------------------------------------------------------------------------- the peers


def dict_lock_runner() -> SyncRunner:
    """The least a named lock in one process does: an owner of 20 random bytes, set on
    the name if it is free, deleted if it is still that owner's (under a mutex)."""
    names: dict[str, str] = {}
    mutex = threading.Lock()

    def cycle() -> None:
        owner = secrets.token_hex(20)
        with mutex:
            if names.setdefault(NAME, owner) != owner:
                raise RuntimeError("the bench name is held")
        with mutex:
            if names.get(NAME) == owner:
                del names[NAME]

    return SyncRunner(cycle, lambda: None)


def flock_runner(directory: Path) -> SyncRunner:
    fd = os.open(directory / "flock.lock", os.O_RDWR | os.O_CREAT, 0o600)

    def cycle() -> None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        fcntl.flock(fd, fcntl.LOCK_UN)

    return SyncRunner(cycle, lambda: os.close(fd))


def redis_py_runner(url: str) -> SyncRunner:
    import redis

    client = redis.Redis.from_url(url)
    return SyncRunner(acquire_release(client.lock(NAME + "/peer", timeout=30)), client.close)


def redis_server_cpu(url: str) -> Callable[[], float]:
    import redis

    client = redis.Redis.from_url(url)

    def used() -> float:
        info: Any = client.info("cpu")
        return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])

    return used


def kazoo_runner(url: str) -> SyncRunner:
    from kazoo.client import KazooClient

    client = KazooClient(hosts=hosts(url))
    client.start()

    def close() -> None:
        client.stop()
        client.close()

    return SyncRunner(acquire_release(client.Lock("/bench-cpu-kazoo")), close)


def etcd_gateway_runner(url: str) -> SyncRunner:
    """A put and a delete of one key through etcd's JSON gateway, on one kept-alive
    connection: the requests a lock cycle cannot do without, bare."""
    host, port = hosts(url).split(",", 1)[0].rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    key = base64.b64encode(b"bench/cpu/peer").decode()
    put = json.dumps({"key": key, "value": base64.b64encode(b"held").decode()})
    delete = json.dumps({"key": key})

    def post(path: str, body: str) -> None:
        conn.request("POST", path, body, {"Content-Type": "application/json"})
        reply = conn.getresponse()
        reply.read()
        if reply.status != 200:
            raise RuntimeError(f"etcd {path}: HTTP {reply.status}")

    def cycle() -> None:
        post("/v3/kv/put", put)
        post("/v3/kv/deleterange", delete)

    return SyncRunner(cycle, conn.close)


def bare_runner(side: BareSide) -> SyncRunner:
    """The database's own lock statements, bare (``harness.sides``)."""
    return SyncRunner(acquire_release(side.lock(NAME), "the bare lock"), side.close)


# --------------------------------------------------------------------------- the run


def peer_of(backend: str, url: str, tmp: Path) -> tuple[str, Opener]:
    """The native way to lock on ``backend``'s server (in-process for memory://)."""
    if backend == "memory":
        return "bare dict lock", dict_lock_runner
    if backend == "sqlite":
        return "fcntl.flock", lambda: flock_runner(tmp)
    if backend == "redis":
        return "redis-py Lock", lambda: redis_py_runner(url)
    if backend == "zookeeper":
        return "kazoo Lock", lambda: kazoo_runner(url)
    if backend == "etcd":
        return "etcd put + delete", lambda: etcd_gateway_runner(url)
    if backend == "postgresql":
        return "pg_advisory_lock", lambda: bare_runner(bare_advisory(url))
    if backend == "mysql":
        return "GET_LOCK", lambda: bare_runner(bare_get_lock(url))
    raise SystemExit(f"--backends: no peer for {backend!r}")


def run(args: argparse.Namespace) -> list[Pairing]:
    found: list[Pairing] = []
    with server_pool() as (pool, tmp):
        for backend in [b for b in BACKENDS if b in args.backends]:  # in this order
            url = backend_url(pool, tmp, backend, "cpu" if backend == "sqlite" else "bench")
            say(f"{backend}: {args.rounds} interleaved rounds of {args.seconds:g}s ...")
            ours = RateResult("fencelock", "fencelock")
            sides: list[tuple[RateResult, Opener]] = [(ours, partial(fencelock_runner, url))]
            label, peer = peer_of(backend, url, tmp)
            theirs = RateResult("peer", label)
            sides.append((theirs, peer))
            server_cpu = redis_server_cpu(url) if backend == "redis" else None
            interleave(sides, args.rounds, args.seconds, 0.1, server_cpu=server_cpu)
            found.append(Pairing(backend, ours, theirs))
    return found


def summary(side: RateResult) -> dict[str, Any]:
    def spread(values: list[float]) -> dict[str, float]:
        clean = [v for v in values if v == v]  # not nan
        if not clean:
            return {}
        return {"median": statistics.median(clean), "min": min(clean), "max": max(clean)}

    return {
        "label": side.label,
        "cpu_us": spread(side.cpu_us),
        "server_us": spread(side.server_us),
        "rate": spread(side.rates),
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
        row = f"| {p.backend} | {_spread(cpu)} |"
        theirs = summary(p.peer)
        tcpu = theirs["cpu_us"]
        server = "-"
        if ours["server_us"] and theirs["server_us"]:
            server = f"{ours['server_us']['median']:.0f}, {theirs['server_us']['median']:.0f}"
        rates = [a / b for a, b in zip(p.fencelock.rates, p.peer.rates, strict=True)]
        lines.append(
            row + f" {p.peer.label} | {_spread(tcpu)} |"
            f" {tcpu['median'] / cpu['median']:.2f}x | {server} |"
            f" {statistics.median(rates):.2f}x ({min(rates):.2f}-{max(rates):.2f}) |"
        )
    return "\n".join(lines)


def _spread(cpu: dict[str, float]) -> str:
    """Median (min-max) in µs: whole numbers, or two significant digits below 10."""
    return " ".join([_us(cpu["median"]), f"({_us(cpu['min'])}-{_us(cpu['max'])})"])


def _us(value: float) -> str:
    return f"{value:.0f}" if value >= 10 else f"{value:.2g}"


def measure(p: Pairing) -> tuple[str, float]:
    """What the check compares: fencelock's CPU a cycle over the peer's (the machine's
    own drift, ±15 % between runs here and +30 % over months, moves both alike)."""
    return "vs_peer", statistics.median(p.fencelock.cpu_us) / statistics.median(p.peer.cpu_us)


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

    def again(risen: list[str]) -> list[str]:
        args.backends = risen
        return risen_over_baseline(run(args))

    return confirmed_rise(risen_over_baseline(found), again, ALLOWED_RISE, "CPU per cycle")


def main() -> int:
    made = parser(__doc__, "2 rounds of 0.2 s: a smoke run, no figures to quote")
    add_backends(made, BACKENDS)
    add_rounds(made, rounds=5, seconds=0.5)
    made.add_argument("--check", action="store_true", help="fail on a rise over the baseline")
    made.add_argument("--save-baseline", action="store_true")
    args = made.parse_args()
    args.backends = backends(made, args.backends, BACKENDS)
    if args.quick:
        args.rounds, args.seconds = 2, 0.2
    found = run(args)
    print(table(found))
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            [
                {
                    "backend": p.backend,
                    "fencelock": summary(p.fencelock),
                    "peer": summary(p.peer),
                }
                for p in found
            ],
            indent=2,
        )
        + "\n"
    )
    if args.save_baseline:
        saved = json.loads(BASELINE.read_text()) if BASELINE.exists() else {}
        saved.update({p.backend: dict([measure(p)]) for p in found})
        BASELINE.write_text(json.dumps(saved, indent=2) + "\n")
    return check(found, args) if args.check else 0


if __name__ == "__main__":
    sys.exit(main())
