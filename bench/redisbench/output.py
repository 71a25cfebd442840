"""The tables, the warnings about noise, and the JSON and markdown result files."""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness import (
    RESULTS_DIR,
    clean_json,
    fmt_ms,
    fmt_number,
    new_table,
)
from rich.console import Console
from rich.table import Table

import fencelock
from redisbench.common import (
    GRACE,
    HUNG,
    KILLED,
    NODES,
    NOISY_ROUNDS,
    REPO_ROOT,
    Settings,
    fair_supported,
)
from redisbench.contended import ContendedResult
from redisbench.many_names import (
    MANY_HOLD,
    MANY_NAMES,
    MANY_REPEATS,
    MANY_TASKS,
    MANY_THREADS,
    MANY_TTL,
    ManyNamesResult,
)
from redisbench.redlock import RedlockResult
from redisbench.targets import Target, fmt_ratio, ratio
from redisbench.uncontended import RateResult, same_api_fencelock


def fmt_rate(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:,.0f}"


def fmt_count_change(before: int | None, after: int | None) -> str:
    if before is None or after is None or before < 0 or after < 0:
        return "-"
    return f"{before} → {after}" if before != after else str(before)


def uncontended_table(results: list[RateResult], settings: Settings) -> Table:
    table = new_table(
        f"1. Uncontended acquire+release on one Redis, one process, one name "
        f"(median of {settings.rounds} interleaved rounds x {settings.round_seconds:g} s)",
        ("lock", "API", "cycles/s", "µs/cycle", "each round (cycles/s)",
         "fencelock (same API) ÷ this"),
        left=2,
    )  # fmt: skip
    for r in results:
        ours = same_api_fencelock(results, r.api)
        table.add_row(
            r.label, r.api, fmt_rate(r.rate), fmt_number(r.micros, "{:.1f}"),
            " ".join(f"{x:,.0f}" for x in r.rates), fmt_ratio(ratio(ours.rate if ours else None,
                                                                   r.rate)),
        )  # fmt: skip
    return table


def handoff_table(results: list[ContendedResult], settings: Settings) -> Table:
    table = new_table(
        f"2a. Contended: {settings.workers} processes, one name on one Redis, hold "
        f"{settings.hold * 1000:g} ms, {settings.contended_seconds:g} s each; "
        "handoff = next acquire return - release call start (ms)",
        ("lock", "waiter wakes by", "CS/s", "fencelock ÷ this", "handoff p50", "p99", "max",
         "to other worker p50", "p99", "max", "handoffs (to other)"),
        left=2,
    )  # fmt: skip
    ours = next((c for c in results if c.key == "fencelock"), None)
    for c in results:
        h, x = c.handoff_ms, c.cross_handoff_ms
        table.add_row(
            c.label, c.wait, f"{c.sections_per_second:,.0f}",
            fmt_ratio(ratio(ours.sections_per_second if ours else None, c.sections_per_second)),
            fmt_ms(h["p50"]), fmt_ms(h["p99"]), fmt_ms(h["max"]),
            fmt_ms(x["p50"]), fmt_ms(x["p99"]), fmt_ms(x["max"]), f"{h['n']:,} ({x['n']:,})",
        )  # fmt: skip
    return table


def fairness_table(results: list[ContendedResult]) -> Table:
    table = new_table(
        "2b. Contended: fairness, acquire() wait (ms), CPU and safety checks",
        ("lock", "sections per worker", "Jain", "spread", "self re-acq", "wait p99",
         "worst wait", "CPU cores (workers / redis)", "requests per CS", "overlaps",
         "token inv.", "errors"),
        left=2,
    )  # fmt: skip
    for c in results:
        table.add_row(
            c.label, " ".join(str(n) for n in c.per_worker), fmt_number(c.jain_index, "{:.2f}"),
            fmt_number(c.spread, "±{:.0%}"), fmt_number(c.self_reacquire_fraction, "{:.0%}"),
            fmt_ms(c.acquire_wait_ms["p99"]), fmt_ms(c.acquire_wait_ms["max"]),
            f"{c.cpu_cores:.2f} / {fmt_number(c.redis_cpu_cores, '{:.2f}')}",
            fmt_number(c.redis_requests_per_section, "{:.1f}"), str(c.overlaps),
            str(c.token_inversions) if c.key.startswith("fencelock") else "n/a", str(c.errors),
        )  # fmt: skip
    return table


def shorten(text: str, limit: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def redlock_outcome(r: RedlockResult) -> str:
    if r.outcome == "hung":
        stuck = f" after {r.stuck_for:.1f} s" if r.stuck_for is not None else ""
        what = "completed nothing" if r.completed == 0 else f"completed {r.completed:,}"
        return f"{what}; a call had not returned{stuck}: killed"
    error = shorten(r.first_error or "?")
    if r.outcome != "ok":
        return f"{r.outcome}: {error}"
    if r.completed == 0:
        return f"completed nothing: {r.failed:,} failed calls; first: {error}"
    if r.failed:
        return f"{r.failed:,} failed calls; first: {error}"
    return "ok" if r.closed else "ok (close() did not return)"


def redlock_table(
    results: list[RedlockResult], title: str, all_up: list[RedlockResult] | None
) -> Table:
    columns = ["lock", "API", "cycles/s"]
    columns += ["÷ all up"] if all_up is not None else ["fencelock (same API) ÷ this"]
    columns += ["p50 ms", "p99 ms", "max ms", "threads", "sockets", "outcome"]
    table = new_table(title, columns, left=2)
    up_rate = {r.key: r.cycles_per_second for r in all_up or []}
    for r in results:
        if all_up is not None:
            compared = fmt_ratio(ratio(r.cycles_per_second, up_rate.get(r.key)))
        else:
            ours_key = "fencelock" if r.api == "sync" else "fencelock-async"
            ours = next((x for x in results if x.key == ours_key), None)
            compared = fmt_ratio(
                ratio(ours.cycles_per_second if ours else None, r.cycles_per_second)
            )
        lat = r.latency_ms
        table.add_row(
            r.label, r.api, fmt_rate(r.cycles_per_second), compared,
            fmt_ms(lat["p50"]), fmt_ms(lat["p99"]), fmt_ms(lat["max"]),
            fmt_count_change(r.threads_before, r.threads_after),
            fmt_count_change(r.sockets_before, r.sockets_after), redlock_outcome(r),
        )  # fmt: skip
    return table


def many_names_table(results: list[ManyNamesResult]) -> Table:
    table = new_table(
        f"5. Many names contended in one process: {MANY_NAMES} names, "
        f"{MANY_NAMES * MANY_TASKS} acquisitions ({MANY_TASKS} asyncio tasks per name; sync: "
        f"{MANY_THREADS} threads x {MANY_REPEATS}), {MANY_HOLD * 1000:g} ms holds, "
        f"ttl={MANY_TTL:g} s; acquire wait",
        ("lock", "API", "acquired", "total s", "wait p50 ms", "p90 ms", "max ms", "errors"),
        left=2,
    )
    for r in results:
        w = r.wait_ms
        table.add_row(
            r.label, r.api, str(r.acquisitions), f"{r.seconds:.2f}",
            fmt_ms(w["p50"]), fmt_ms(w["p90"]), fmt_ms(w["max"]), str(r.errors),
        )  # fmt: skip
    return table


def targets_table(found: list[Target]) -> Table:
    table = new_table("Targets", ("#", "target", "goal", "measured", "met"), left=2)
    for t in sorted(found, key=lambda t: t.scenario):
        met = "n/a" if t.met is None else ("[green]yes[/green]" if t.met else "[red]no[/red]")
        table.add_row(str(t.scenario), t.what, t.goal, t.measured, met)
    return table


@dataclass
class Results:
    uncontended: list[RateResult] = field(default_factory=list)
    contended: list[ContendedResult] = field(default_factory=list)
    redlock_up: list[RedlockResult] = field(default_factory=list)
    redlock_degraded: list[RedlockResult] = field(default_factory=list)
    many_names: list[ManyNamesResult] = field(default_factory=list)
    load_at_start: tuple[float, float, float] | None = None  # other work on the host skews rates
    warnings: list[str] = field(default_factory=list)


def noise_warnings(results: Results) -> list[str]:
    """Rows whose rounds disagree, and a busy host: the ratios are not to be trusted then."""
    found = []
    rows = [(r.label, r.rates) for r in results.uncontended]
    rows += [(r.label, r.rounds_cycles_per_second) for r in results.redlock_up]
    for label, rates in rows:
        if len(rates) > 1 and min(rates) > 0 and max(rates) / min(rates) > NOISY_ROUNDS:
            found.append(
                f"{label}: rounds range {min(rates):,.0f}-{max(rates):,.0f} cycles/s "
                f"(more than {NOISY_ROUNDS - 1:.0%} apart)"
            )
    busy = max((x[0] for x in (results.load_at_start, load_average()) if x), default=0.0)
    if busy > (os.cpu_count() or 1):
        found.append(f"load average {busy:.1f} on {os.cpu_count()} CPUs: other work was running")
    return found


def tables(results: Results, settings: Settings, found: list[Target]) -> list[Table]:
    out: list[Table] = []
    if results.uncontended:
        out.append(uncontended_table(results.uncontended, settings))
    if results.contended:
        out += [handoff_table(results.contended, settings), fairness_table(results.contended)]
    if results.redlock_up:
        out.append(
            redlock_table(
                results.redlock_up,
                f"3. Redlock, {NODES} nodes up: acquire+release in one process per lock, median "
                f"of {settings.redlock_rounds} interleaved rounds x "
                f"{settings.redlock_seconds / settings.redlock_rounds:g} s; latency of one cycle",
                None,
            )
        )
    if results.redlock_degraded:
        out.append(
            redlock_table(
                results.redlock_degraded,
                f"4. Redlock, node {HUNG} hung (SIGSTOP) + node {KILLED} killed after warm-up; "
                f"{settings.redlock_seconds:g} s per row, killed {GRACE:g} s after if a call "
                "hangs; threads and sockets before → after",
                results.redlock_up,
            )
        )
    if results.many_names:
        out.append(many_names_table(results.many_names))
    if found:
        out.append(targets_table(found))
    return out


def render(results: Results, made: list[Table]) -> None:
    console = Console(width=None if sys.stdout.isatty() else 200)
    for table in made:
        console.print(table)
    for c in results.contended:
        if c.first_error:
            last_line = c.first_error.strip().splitlines()[-1]
            console.print(f"[red]{c.label}: {c.errors} errors; first: {last_line}[/red]")
    for m in results.many_names:
        if m.first_error:
            console.print(
                f"[red]{m.label} {m.api}: {m.errors} errors; first: {m.first_error}[/red]"
            )
    for warning in results.warnings:
        console.print(f"[yellow]noisy: {warning}; rerun on a quiet host for stable ratios[/yellow]")


def write_json(
    results: Results,
    settings: Settings,
    versions: dict[str, str | None],
    found: list[Target],
    elapsed: float,
) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = RESULTS_DIR / f"redis-{stamp}.json"
    document = {
        "benchmark": "redis_bench",
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "seconds": elapsed,
        "settings": asdict(settings),
        "environment": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "redis_server": redis_server_version(),
            "fencelock": fencelock.__version__,
            "git": git_state(),
            "fair_keyword": fair_supported(),
            "peers": versions,
            "load_average_at_start": results.load_at_start,
            "load_average_at_end": load_average(),
        },
        "uncontended": [
            {
                "key": r.key,
                "label": r.label,
                "api": r.api,
                "cycles_per_second": r.rate,
                "micros_per_cycle": r.micros,
                "rounds_cycles_per_second": r.rates,
                "total_cycles": r.cycles,
                "fencelock_ratio": ratio(
                    (same_api_fencelock(results.uncontended, r.api) or r).rate, r.rate
                ),
            }
            for r in results.uncontended
        ],
        "contended": [asdict(c) for c in results.contended],
        "redlock_all_up": [asdict(r) for r in results.redlock_up],
        "redlock_hung_and_killed": [asdict(r) for r in results.redlock_degraded],
        "many_names": [asdict(r) for r in results.many_names],
        "targets": [asdict(t) for t in found],
        "warnings": results.warnings,
    }
    path.write_text(json.dumps(clean_json(document), indent=2, allow_nan=False) + "\n")
    return path


def load_average() -> tuple[float, float, float] | None:
    return os.getloadavg() if hasattr(os, "getloadavg") else None


def git_state() -> str | None:
    """The commit measured, with "-dirty" if the work tree had changes (read-only git)."""
    import subprocess

    with contextlib.suppress(OSError, subprocess.SubprocessError):
        done = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "describe", "--always", "--dirty"],
            capture_output=True, text=True, check=False, timeout=10,
        )  # fmt: skip
        return done.stdout.strip() or None
    return None


def redis_server_version() -> str | None:
    import shutil
    import subprocess

    binary = shutil.which("redis-server")
    if binary is None:
        return None
    done = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip()
