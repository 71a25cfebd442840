"""fencelock's Redis backends side by side with peer Redis locks.

Run with ``make bench`` or ``.venv/bin/python bench/redis_bench.py`` (``--quick`` for a
smoke run). It starts its own redis-server processes on free loopback ports (one for
``redis://``, five for ``redlock://``) and stops them at the end. Five measurements:

1. **Uncontended** acquire+release cycles/s on one Redis, in one process: fencelock
   sync and asyncio (``ttl=30, renew=True``), redis-py's Lock (sync and asyncio),
   python-redis-lock, and two raw redis-py loops: ``SET NX PX`` + an EVALSHA
   compare-and-delete, and fencelock's own two Lua scripts with no library around them.
2. **Contended**: N processes loop acquire -> hold -> release on one name. Critical
   sections/s, handoff latency (release call start -> next holder's acquire return, both
   read from :func:`fencelock.clock.now`, one clock for every process), fairness and the
   worst acquire wait.
3. **Redlock, 5 nodes up**: cycles/s of fencelock (with fencing tokens), aioredlock,
   redlock-py and pottery, each row in its own process.
4. **Redlock, 1 node hung (SIGSTOP) + 1 killed** while the client runs: the same rows,
   with latency, and thread and socket counts before and after. A row whose call does
   not return is killed at a hard deadline and reported as hung.
5. **Many names contended**, in one process: 20 names, 400 acquisitions (asyncio: 20
   tasks per name; sync: 4 threads per name, 5 each), 10 ms holds, ``ttl=5``, on
   ``redis://`` and ``redlock://``. Total time and the acquire waits: a waiter whose
   wake-up is lost waits the holder's TTL.

It prints tables (rich) and writes ``bench/results/redis-<timestamp>.json``. It installs
nothing: a peer library missing from the venv is reported and its rows are skipped.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence

from harness.peers import say
from harness.results import load_average
from harness.servers import server_pool
from redisbench.common import NODES, Settings, peer_versions, quiet_peer_logs
from redisbench.contended import analyse, contended_run, contended_specs
from redisbench.fleet import Fleet
from redisbench.many_names import measure_many_names
from redisbench.output import Results, render, tables, warnings, write_json
from redisbench.redlock import measure_redlock_degraded, measure_redlock_up
from redisbench.targets import targets
from redisbench.uncontended import measure_uncontended


def failed(results: Results) -> list[str]:
    """fencelock rows that broke mutual exclusion, token order, or hit errors."""
    problems = []
    for c in results.contended:
        if c.fencelock and (c.errors or c.overlaps or c.token_inversions):
            problems.append(f"{c.label}: {c.errors} errors, {c.overlaps} overlaps, "
                            f"{c.token_inversions} token inversions")  # fmt: skip
    for r in (*results.redlock_up, *results.redlock_degraded):
        if r.tokens and (r.outcome != "ok" or r.token_inversions or (not r.degraded and r.failed)):
            problems.append(f"{r.label}: {r.outcome}, {r.failed} failed calls, "
                            f"{r.token_inversions} token inversions")  # fmt: skip
    for m in results.many_names:
        if m.errors:
            problems.append(f"{m.label} {m.api} (many names): {m.errors} errors")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    settings = Settings.from_args(argv)
    quiet_peer_logs()
    versions = peer_versions()
    if versions.get("redis") is None:
        print("error: redis-py is needed (pip install -e '.[redis,bench]')", file=sys.stderr)
        return 2
    started = time.monotonic()
    results = Results(load_at_start=load_average())
    with server_pool("fencelock-redis-bench-") as (pool, _tmp):
        fleet = Fleet(pool)
        try:
            fleet.start(NODES)
        except RuntimeError as exc:  # no redis-server binary, or it would not start
            print(f"error: {exc}", file=sys.stderr)
            return 2
        say(
            f"redis-servers: single on {fleet.single_address[1]}, Redlock nodes on "
            f"{', '.join(str(n.port) for n in fleet.nodes)}"
        )
        run_scenarios(fleet, settings, versions, results)
    found = targets(
        results.uncontended,
        results.contended,
        results.redlock_up,
        results.redlock_degraded,
        results.many_names,
    )
    results.warnings = warnings(results)
    made = tables(results, settings, found)
    render(results, made)
    elapsed = time.monotonic() - started
    loads = " -> ".join(f"{x[0]:.1f}" for x in (results.load_at_start, load_average()) if x)
    heading = f"Load average {loads} on {os.cpu_count()} CPUs, {elapsed:.0f} s."
    path = write_json(results, settings, versions, found, elapsed, made, heading)
    print(
        f"results: {path} and .md ({elapsed:.0f} s; load average {loads} on {os.cpu_count()} CPUs)"
    )
    problems = failed(results)
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return 1 if problems else 0


def run_scenarios(
    fleet: Fleet, settings: Settings, versions: dict[str, str | None], results: Results
) -> None:
    if 1 in settings.scenarios:
        say(f"uncontended: {settings.rounds} rounds x {settings.round_seconds:g} s per lock ...")
        results.uncontended = measure_uncontended(fleet, settings, versions)
    if 2 in settings.scenarios:
        for spec in contended_specs(fleet, versions):
            say(
                f"contended: {spec.label}, {settings.workers} processes, "
                f"{settings.contended_seconds:g} s ..."
            )
            reports, load = contended_run(spec, settings, fleet.single_pid)
            results.contended.append(analyse(spec, reports, load, settings))
    if 3 in settings.scenarios or 4 in settings.scenarios:
        results.redlock_up = measure_redlock_up(fleet, settings, versions)
    if 4 in settings.scenarios:
        results.redlock_degraded = measure_redlock_degraded(fleet, settings, versions)
    if 5 in settings.scenarios:
        results.many_names = measure_many_names(fleet)


if __name__ == "__main__":
    sys.exit(main())
