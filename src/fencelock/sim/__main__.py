"""``python -m fencelock.sim``: run seeds until a budget of CPU time is spent or one
breaks an invariant; ``--seed N`` replays one run exactly, with its trace."""

from __future__ import annotations

import argparse
import sys
import time

from fencelock.engine.reintroduced import KNOWN
from fencelock.sim.workloads import WORKLOADS
from fencelock.sim.world import FAMILIES, Outcome, Plan, run


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m fencelock.sim", description=__doc__)
    parser.add_argument("--seed", type=int, help="replay this one run, trace included")
    parser.add_argument("--first-seed", type=int, default=0, help="where a search starts")
    parser.add_argument("--cpu", type=float, default=10.0, help="CPU seconds a search may use")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--duration", type=float, default=30.0, help="virtual seconds a run")
    parser.add_argument("--ttl", type=float, default=1.0)
    parser.add_argument("--family", choices=FAMILIES, default="lease", help="the model")
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="lock")
    parser.add_argument(
        "--bug", action="append", default=[], choices=sorted(KNOWN), help="put a bug back"
    )
    return parser.parse_args(argv)


def _plan(args: argparse.Namespace, seed: int) -> Plan:
    return Plan(
        seed=seed,
        clients=args.clients,
        duration=args.duration,
        ttl=args.ttl,
        bugs=tuple(args.bug),
        family=args.family,
        workload=args.workload,
    )


def _failed(outcome: Outcome) -> int:
    print(f"seed {outcome.plan.seed}: VIOLATION: {outcome.violation}")
    print("the last events (virtual seconds from the start):")
    print("\n".join(f"  {line}" for line in outcome.trace))
    print(
        f"replay: python -m fencelock.sim --family {outcome.plan.family} --workload "
        f"{outcome.plan.workload} --seed {outcome.plan.seed}"
        + "".join(f" --bug {bug}" for bug in outcome.plan.bugs)
    )
    return 1


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    if args.seed is not None:
        outcome = run(_plan(args, args.seed))
        if not outcome.ok:
            return _failed(outcome)
        print(
            f"seed {args.seed}: ok, {outcome.steps} steps, {outcome.grants} grants in "
            f"{outcome.virtual_seconds:.1f} virtual seconds (trace {outcome.digest})"
        )
        return 0
    began, seed = time.process_time(), args.first_seed
    runs = steps = 0
    lease_seconds = virtual = 0.0
    while time.process_time() - began < args.cpu:
        outcome = run(_plan(args, seed))
        runs, steps = runs + 1, steps + outcome.steps
        lease_seconds, virtual = (
            lease_seconds + outcome.lease_seconds,
            virtual + outcome.virtual_seconds,
        )
        if not outcome.ok:
            print(f"found after {runs} runs, {time.process_time() - began:.2f} CPU seconds")
            return _failed(outcome)
        seed += 1
    cpu = time.process_time() - began
    print(
        f"{runs} runs (seeds {args.first_seed}-{seed - 1}), no violation: {steps} steps, "
        f"{virtual:.0f} virtual seconds, {lease_seconds:.0f} lease-seconds in {cpu:.1f} CPU "
        f"seconds ({steps / cpu:,.0f} steps and {lease_seconds / cpu:,.0f} lease-seconds "
        "per CPU second)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
