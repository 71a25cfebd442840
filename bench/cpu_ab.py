"""CPU per lock cycle of two checkouts of fencelock, side by side on the same servers.

``python bench/cpu_ab.py OLD_SRC NEW_SRC --backends etcd,mysql`` starts each backend's
server once, then runs the uncontended acquire-and-release in a fresh process per round,
alternating the two ``src`` directories (A, B, A, B…, ``--rounds`` each), and prints each
side's median CPU per cycle (user + sys of the process, every thread) and the ratio B/A.
A wall-clock rate here moves ±40 % between runs; interleaved rounds of CPU per cycle move
both sides alike, so the ratio is what to read. Make an old checkout with
``git worktree add /tmp/old <commit>``. ``--check 1.10`` exits 1 if any backend's paired
ratio is above 1.10 twice (a backend above it is measured again: one noisy stretch of a
shared machine read etcd 1.13x, then 1.03x) (``make bench-ab``: against the reference
commit).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

from harness.cli import add_backends, backends, parser
from harness.servers import BACKENDS, backend_url, server_pool

ROUND = """
import sys, time, fencelock
with fencelock.connect(sys.argv[1]) as client:
    lock = client.lock("bench/ab", ttl=30)
    for _ in range(100):
        lock.acquire().release()
    began, cycles = time.process_time(), int(sys.argv[2])
    for _ in range(cycles):
        lock.acquire().release()
    print((time.process_time() - began) / cycles * 1e6)
"""


def one_round(src: Path, url: str, cycles: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(  # noqa: S603 (an argument list built here, no shell)
        [sys.executable, "-c", ROUND, url, str(cycles)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(done.stdout.strip())


def measured(backend: str, url: str, args: argparse.Namespace) -> float:
    """``args.rounds`` interleaved rounds of each side, printed; the paired ratio B/A."""
    a: list[float] = []
    b: list[float] = []
    for _ in range(args.rounds):
        a.append(one_round(args.old, url, args.cycles))
        b.append(one_round(args.new, url, args.cycles))
    ma, mb = statistics.median(a), statistics.median(b)
    paired = sorted(y / x for x, y in zip(a, b, strict=True))
    print(
        f"{backend:<11} {ma:8.0f} {mb:8.0f} {mb / ma:6.2f}   paired "
        f"{statistics.median(paired):.2f} [{paired[0]:.2f}-{paired[-1]:.2f}]",
        flush=True,
    )
    return statistics.median(paired)


def main() -> int:
    made = parser(__doc__, "2 rounds of 200 cycles: a smoke run, no figures to quote")
    made.add_argument("old", type=Path, help="the A side's src directory")
    made.add_argument("new", type=Path, help="the B side's src directory")
    add_backends(made, BACKENDS)
    made.add_argument("--rounds", type=int, default=5)
    made.add_argument("--cycles", type=int, default=1000)
    made.add_argument("--check", type=float, help="fail if a paired B/A is above this")
    args = made.parse_args()
    if args.quick:
        args.rounds, args.cycles = 2, 200
    above: list[str] = []
    with server_pool() as (pool, tmp):
        found = {
            b: backend_url(pool, tmp, b, "ab") for b in backends(made, args.backends, BACKENDS)
        }
        print(
            f"{'backend':<11} {'A µs':>8} {'B µs':>8} {'B/A':>6}   (median of {args.rounds}; "
            "paired: the median of each round's B/A, [lowest-highest])"
        )
        for backend, url in found.items():
            ratio = measured(backend, url, args)
            if args.check is not None and ratio > args.check:
                # one noisy stretch is measured again: a rise is above twice
                print(f"{backend}: above {args.check}x, measured again", flush=True)
                if measured(backend, url, args) > args.check:
                    above.append(backend)
    if above:
        print(f"CPU per cycle above {args.check}x the A side on: {', '.join(above)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
