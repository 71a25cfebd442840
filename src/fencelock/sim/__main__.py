"""``python -m fencelock.sim``: run seeds until a budget of CPU time is spent or one
breaks an invariant; ``--seed N`` replays one run exactly, with its trace."""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass

from fencelock.sim import sqlite_host
from fencelock.sim.run_options import add_run_options
from fencelock.sim.workloads import WORKLOADS
from fencelock.sim.world import (
    FAMILIES,
    ON_REDIS,
    OUTLIVING,
    SEARCHED,
    Outcome,
    Plan,
    missing_for_redis,
    run,
)

SQLITE = "sqlite"  # not a Plan's family: fencelock.sim.sqlite_host runs it, no asyncio


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m fencelock.sim", description=__doc__)
    add_run_options(parser)
    parser.add_argument(
        "--family",
        choices=(*FAMILIES, SQLITE),
        default="lease",
        help="the model (sqlite: the real embedded backend on a real file, simulated hosts)",
    )
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="lock")
    parser.add_argument(
        "--all", action="store_true", help="share --cpu among every family and workload"
    )
    parser.add_argument(
        "--cancels",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="cancel extends in flight, and shut a client's loop down with a request out "
        "(on by default; --no-cancels leaves them out)",
    )
    return parser.parse_args(argv)


def _plan(args: argparse.Namespace, seed: int, **pair: str) -> Plan:
    return Plan(
        seed=seed,
        clients=args.clients,
        duration=args.duration,
        ttl=args.ttl,
        bugs=tuple(args.bug),
        family=pair.get("family", args.family),
        workload=pair.get("workload", args.workload),
        cancels=args.cancels,
    )


def _failed(outcome: Outcome) -> int:
    print(f"seed {outcome.plan.seed}: VIOLATION: {outcome.violation}")
    print("the last events (virtual seconds from the start):")
    print("\n".join(f"  {line}" for line in outcome.trace))
    print(
        f"replay: python -m fencelock.sim --family {outcome.plan.family} --workload "
        f"{outcome.plan.workload} --seed {outcome.plan.seed}"
        + ("" if outcome.plan.cancels else " --no-cancels")
        + "".join(f" --bug {bug}" for bug in outcome.plan.bugs)
    )
    return 1


@dataclass
class Search:
    """A search's tally."""

    runs: int = 0
    steps: int = 0
    virtual: float = 0.0
    lease_seconds: float = 0.0
    cpu: float = 0.0
    last_seed: int = -1

    def line(self, first_seed: int) -> str:
        cpu = max(self.cpu, 1e-9)
        return (
            f"{self.runs} runs (seeds {first_seed}-{self.last_seed}), no violation: "
            f"{self.steps} steps, {self.virtual:.0f} virtual seconds, "
            f"{self.lease_seconds:.0f} lease-seconds in {self.cpu:.1f} CPU seconds "
            f"({self.steps / cpu:,.0f} steps and {self.lease_seconds / cpu:,.0f} "
            "lease-seconds per CPU second)"
        )


def _search(args: argparse.Namespace, cpu: float, **plan: str) -> Search | Outcome:
    """Seeds from ``--first-seed`` on until ``cpu`` seconds are spent: the tally, or
    the first run that broke an invariant."""
    tally, began, seed = Search(), time.process_time(), args.first_seed
    while time.process_time() - began < cpu:
        outcome = run(_plan(args, seed, **plan))
        tally.runs, tally.steps = tally.runs + 1, tally.steps + outcome.steps
        tally.virtual += outcome.virtual_seconds
        tally.lease_seconds += outcome.lease_seconds
        tally.last_seed = seed
        if not outcome.ok:
            print(f"found after {tally.runs} runs, {time.process_time() - began:.2f} CPU seconds")
            return outcome
        seed += 1
    tally.cpu = time.process_time() - began
    return tally


def _everything(args: argparse.Namespace) -> int:
    """``--all``: the CPU budget shared by every family and workload a run can pair."""
    pairs = [
        (family, workload)
        for family in SEARCHED
        for workload in sorted(WORKLOADS)
        if not (workload in OUTLIVING and family == "session")
    ]
    missing = missing_for_redis()
    if missing is not None:  # the other families need nothing beyond the library
        print(f"{', '.join(ON_REDIS)} (every workload) left out: {missing}")
        pairs = [(family, workload) for family, workload in pairs if family not in ON_REDIS]
    total = Search()
    for family, workload in pairs:
        found = _search(args, args.cpu / len(pairs), family=family, workload=workload)
        if isinstance(found, Outcome):
            return _failed(found)
        print(f"{family:>8} {workload:<10} {found.line(args.first_seed)}", flush=True)
        total.runs, total.steps = total.runs + found.runs, total.steps + found.steps
        total.virtual += found.virtual
        total.lease_seconds += found.lease_seconds
        total.cpu += found.cpu
        total.last_seed = max(total.last_seed, found.last_seed)
    print(f"every pair: {total.line(args.first_seed)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    if args.family == SQLITE and not args.all:
        return sqlite_host.cli(args)
    if args.seed is not None:
        outcome = run(_plan(args, args.seed))
        if not outcome.ok:
            return _failed(outcome)
        print(
            f"seed {args.seed}: ok, {outcome.steps} steps, {outcome.grants} grants in "
            f"{outcome.virtual_seconds:.1f} virtual seconds (trace {outcome.digest})"
        )
        return 0
    if args.all:
        return _everything(args)
    found = _search(args, args.cpu)
    if isinstance(found, Outcome):
        return _failed(found)
    print(found.line(args.first_seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
