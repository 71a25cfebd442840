"""What each Redis command of a lock cycle costs the server: fencelock beside redis-py.

``server_cpu_bench.py`` says how much server CPU a cycle takes; this says where it goes.
On one redis-server of its own, each side runs its cycles while the server counts every
command (``INFO commandstats``, reset before each side): the calls a cycle and the
microseconds a call and a cycle, per command. ``EVALSHA``'s time includes the commands
its script calls, which are also counted on their own rows.

- ``uncontended``: one client, acquire then release at once, ``--cycles`` times;
- ``one``: ``--workers`` processes on one name for ``--seconds``, after a warm-up second.

``python bench/redis_commands.py`` (~15 s). A table per scenario and side, on stdout.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event

from harness.cli import parser
from harness.peers import optional, say, version
from harness.servers import server_pool

import fencelock

TTL = 30.0
SKIPPED = ("cmdstat_config", "cmdstat_info")  # the benchmark's own reading
Stats = dict[str, dict[str, float]]  # INFO commandstats


@dataclass(frozen=True, kw_only=True)
class Command:
    name: str
    calls: float
    usec_per_call: float
    usec: float


def commands(stats: Stats, cycles: float) -> list[Command]:
    """Each command's calls and microseconds a cycle, the most costly first."""
    rows = [
        Command(
            name=key.removeprefix("cmdstat_"),
            calls=row["calls"] / cycles,
            usec_per_call=row["usec_per_call"],
            usec=row["usec"] / cycles,
        )
        for key, row in stats.items()
        if key not in SKIPPED and not key.startswith("cmdstat_config|")
    ]
    return sorted(rows, key=lambda row: -row.usec)


def table(title: str, rows: list[Command], note: str) -> str:
    lines = [
        f"**{title}** ({note})",
        "",
        "| command | calls a cycle | µs a call | µs a cycle |",
        "| --- | ---: | ---: | ---: |",
    ]
    lines += [
        f"| `{r.name}` | {r.calls:.2f} | {r.usec_per_call:.2f} | {r.usec:.2f} |" for r in rows
    ]
    return "\n".join([*lines, ""])


def fencelock_cycle(url: str) -> Callable[[], None]:
    lock = fencelock.connect(url).lock("bench/commands", ttl=TTL)
    return lambda: lock.acquire(timeout=10).release()


def redis_py_cycle(url: str) -> Callable[[], None]:
    import redis

    lock = redis.Redis.from_url(url).lock("bench/commands-peer", timeout=TTL)

    def cycle() -> None:
        if not lock.acquire(blocking=True, blocking_timeout=10):
            raise RuntimeError("redis-py's Lock was not acquired within 10 s")
        lock.release()

    return cycle


SIDES: dict[str, Callable[[str], Callable[[], None]]] = {
    "fencelock": fencelock_cycle,
    "redis-py": redis_py_cycle,
}


def _worker(side: str, url: str, stop: Event, done: Synchronized[int]) -> None:
    cycle = SIDES[side](url)
    while not stop.is_set():
        cycle()
        with done.get_lock():
            done.value += 1


def contended(side: str, url: str, workers: int, seconds: float) -> tuple[Stats, int]:
    """``workers`` processes on one name: the server's commandstats over ``seconds``
    and the cycles completed meanwhile."""
    import redis

    server = redis.Redis.from_url(url)
    context = multiprocessing.get_context("spawn")
    stop, done = context.Event(), context.Value("q", 0)
    processes = [
        context.Process(target=_worker, args=(side, url, stop, done)) for _ in range(workers)
    ]
    for process in processes:
        process.start()
    time.sleep(1.0 + workers * 0.3)  # every worker connected and cycling
    with done.get_lock():
        done.value = 0
    server.config_resetstat()
    time.sleep(seconds)
    stats: Stats = server.info("commandstats")
    cycles = done.value
    stop.set()
    for process in processes:
        process.join()
    return stats, cycles


def main() -> int:
    made = parser(__doc__)
    made.add_argument("--cycles", type=int, default=5000, help="uncontended cycles a side")
    made.add_argument("--workers", type=int, default=8, help="contending processes")
    made.add_argument("--seconds", type=float, default=3.0, help="contended window")
    args = made.parse_args()
    if optional("redis") is None:
        return 1
    if args.quick:
        args.cycles, args.seconds = 300, 1.0
    import redis

    with server_pool("fencelock-commands-") as (pool, _tmp):
        url = pool.redis().url
        server = redis.Redis.from_url(url)
        say(f"redis-py {version('redis')}, fencelock {fencelock.__version__}")
        for side, make in SIDES.items():
            cycle = make(url)
            for _ in range(200):  # scripts loaded, connections made
                cycle()
            server.config_resetstat()
            for _ in range(args.cycles):
                cycle()
            rows = commands(server.info("commandstats"), args.cycles)
            print(table(f"uncontended, {side}", rows, f"{args.cycles} cycles"))
        for side in SIDES:
            stats, cycles = contended(side, url, args.workers, args.seconds)
            rate = cycles / args.seconds
            rows = commands(stats, max(cycles, 1))
            note = f"{args.workers} processes, {cycles} cycles in {args.seconds:g} s: {rate:,.0f}/s"
            print(table(f"one name, {side}", rows, note))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
