"""The tables, the warnings about noise, and the JSON and markdown result files."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.results import command, environment, noise_warnings, write_results
from harness.rounds import RateResult
from harness.stats import ratio
from harness.tables import (
    FAIRNESS,
    HANDOFF_COUNT,
    HANDOFFS,
    LOCK,
    SECTIONS_PER_SECOND,
    SELF_REACQUIRE,
    TOKENS_AND_ERRORS,
    WAKES,
    Column,
    Target,
    console,
    fmt_ms,
    fmt_number,
    fmt_rate,
    fmt_ratio,
    fmt_rounds,
    new_table,
    print_errors,
    rows_table,
    targets_table,
    waits,
)
from rich.table import Table

from redisbench.common import GRACE, HUNG, KILLED, NODES, Settings, fair_supported
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
from redisbench.uncontended import same_api_fencelock


def fmt_count_change(before: int | None, after: int | None) -> str:
    if before is None or after is None or before < 0 or after < 0:
        return "-"
    return f"{before} → {after}" if before != after else str(before)


def uncontended_table(results: list[RateResult], settings: Settings) -> Table:
    def versus(r: RateResult) -> str:
        ours = same_api_fencelock(results, r.group)
        return fmt_ratio(ratio(ours.rate if ours else None, r.rate))

    columns: list[Column] = [
        ("lock", lambda r: r.label),
        ("API", lambda r: r.group),
        ("cycles/s", lambda r: fmt_rate(r.rate)),
        ("µs/cycle", lambda r: fmt_number(r.micros, "{:.1f}")),
        ("each round (cycles/s)", lambda r: fmt_rounds(r.rates)),
        ("fencelock (same API) ÷ this", versus),
    ]
    title = (
        f"1. Uncontended acquire+release on one Redis, one process, one name "
        f"(median of {settings.rounds} interleaved rounds x {settings.round_seconds:g} s)"
    )
    return rows_table(title, results, columns, left=2)


def handoff_table(results: list[ContendedResult], settings: Settings) -> Table:
    ours = next((c for c in results if c.key == "fencelock"), None)
    versus: Column = (
        "fencelock ÷ this",
        lambda c: fmt_ratio(
            ratio(ours.sections_per_second if ours else None, c.sections_per_second)
        ),
    )
    title = (
        f"2a. Contended: {settings.workers} processes, one name on one Redis, hold "
        f"{settings.hold * 1000:g} ms, {settings.contended_seconds:g} s each; "
        "handoff = next acquire return - release call start (ms)"
    )
    columns = [LOCK, WAKES, SECTIONS_PER_SECOND, versus, *HANDOFFS, HANDOFF_COUNT]
    return rows_table(title, results, columns, left=2)


def fairness_table(results: list[ContendedResult]) -> Table:
    columns: list[Column] = [
        LOCK,
        *FAIRNESS,
        SELF_REACQUIRE,
        *waits("worst wait"),
        (
            "CPU cores (workers / redis)",
            lambda c: f"{c.cpu_cores:.2f} / {fmt_number(c.redis_cpu_cores, '{:.2f}')}",
        ),
        ("requests per CS", lambda c: fmt_number(c.redis_requests_per_section, "{:.1f}")),
        ("overlaps", lambda c: str(c.overlaps)),
        *TOKENS_AND_ERRORS,
    ]
    title = "2b. Contended: fairness, acquire() wait (ms), CPU and safety checks"
    return rows_table(title, results, columns, left=2)


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


@dataclass
class Results:
    uncontended: list[RateResult] = field(default_factory=list)
    contended: list[ContendedResult] = field(default_factory=list)
    redlock_up: list[RedlockResult] = field(default_factory=list)
    redlock_degraded: list[RedlockResult] = field(default_factory=list)
    many_names: list[ManyNamesResult] = field(default_factory=list)
    load_at_start: tuple[float, float, float] | None = None  # other work on the host skews rates
    warnings: list[str] = field(default_factory=list)


def warnings(results: Results) -> list[str]:
    """Rows whose rounds disagree, and a busy host: the ratios are not to be trusted then."""
    rows = [(r.label, r.rates) for r in results.uncontended]
    rows += [(r.label, r.rounds_cycles_per_second) for r in results.redlock_up]
    return noise_warnings(rows, results.load_at_start)


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
        out.append(targets_table(sorted(found, key=lambda t: t.scenario)))
    return out


def render(results: Results, made: list[Table]) -> None:
    out = console()
    for table in made:
        out.print(table)
    print_errors(out, [(c.label, c.errors, c.first_error) for c in results.contended])
    for m in results.many_names:
        if m.first_error:
            out.print(f"[red]{m.label} {m.api}: {m.errors} errors; first: {m.first_error}[/red]")
    for warning in results.warnings:
        out.print(f"[yellow]noisy: {warning}; rerun on a quiet host for stable ratios[/yellow]")


def write_json(
    results: Results,
    settings: Settings,
    versions: dict[str, str | None],
    found: list[Target],
    elapsed: float,
    made: list[Table],
    heading: str,
) -> Path:
    document = {
        "benchmark": "redis_bench",
        "seconds": elapsed,
        "settings": asdict(settings),
        "environment": environment(
            redis_server=command("redis-server", "--version"),
            fair_keyword=fair_supported(),
            peers=versions,
            load_average_at_start=results.load_at_start,
        ),
        "uncontended": [
            {
                "key": r.key,
                "label": r.label,
                "api": r.group,
                "cycles_per_second": r.rate,
                "micros_per_cycle": r.micros,
                "rounds_cycles_per_second": r.rates,
                "total_cycles": r.cycles,
                "fencelock_ratio": ratio(
                    (same_api_fencelock(results.uncontended, r.group) or r).rate, r.rate
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
    return write_results("redis", document, made, heading)
