"""Statistics of a run: percentiles, fairness, ratios, and the summary of a contended run."""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from harness.workers import WorkerReport


def median(values: Sequence[float]) -> float:
    """The median, nan when there is nothing to take it of."""
    return statistics.median(values) if values else math.nan


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """``numerator / denominator``, or None where either is missing, nan or zero."""
    if numerator is None or denominator is None or not denominator:
        return None
    if math.isnan(numerator) or math.isnan(denominator):
        return None
    return numerator / denominator


def percentile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of sorted values (nan when empty)."""
    if not ordered:
        return math.nan
    rank = max(math.ceil(q / 100 * len(ordered)), 1)
    return ordered[rank - 1]


def summary_ms(values: Sequence[float]) -> dict[str, float | int]:
    ordered = sorted(v * 1000 for v in values)
    return {
        "n": len(ordered),
        "mean": statistics.fmean(ordered) if ordered else math.nan,
        "p50": percentile(ordered, 50),
        "p90": percentile(ordered, 90),
        "p99": percentile(ordered, 99),
        "p999": percentile(ordered, 99.9),
        "max": ordered[-1] if ordered else math.nan,
    }


def jain(counts: Sequence[int]) -> float:
    """Jain's fairness index: 1.0 when every worker got the same share, 1/n when one got all."""
    total = sum(counts)
    squares = sum(c * c for c in counts)
    return total * total / (len(counts) * squares) if squares else math.nan


@dataclass
class Summary:
    """What a contended run measured, whatever the lock."""

    workers: int
    seconds: float
    sections_per_second: float
    handoff_ms: dict[str, float | int]
    cross_handoff_ms: dict[str, float | int]
    acquire_wait_ms: dict[str, float | int]
    self_reacquire_fraction: float
    ceiling_per_second: float  # 1 / mean measured hold: no lock can pass more CS/s
    per_worker: list[int]
    jain_index: float
    spread: float  # the largest |count / mean - 1| over the workers
    cpu_cores: float
    overlaps: int
    token_inversions: int
    errors: int
    first_error: str | None


def summarise(reports: list[WorkerReport], workers: int, seconds: float, tokens: bool) -> Summary:
    """Order every critical section by acquire time; each neighbour pair is one handoff.

    ``tokens``: the lock issues fencing tokens, which must increase in that order.
    """
    ordered = sorted(
        ((section, report.index) for report in reports for section in report.sections),
        key=lambda item: item[0][1],
    )
    handoffs, cross = [], []
    self_handoffs = overlaps = inversions = 0
    for (prev, prev_worker), (nxt, nxt_worker) in itertools.pairwise(ordered):
        gap = nxt[1] - prev[2]  # next acquire return - previous release call start
        overlaps += gap < 0
        inversions += tokens and nxt[4] <= prev[4]
        handoffs.append(gap)
        if nxt_worker == prev_worker:
            self_handoffs += 1
        else:
            cross.append(gap)
    holds = [s[2] - s[1] for s, _ in ordered if s[2] > s[1]]
    start = min((s[0] for s, _ in ordered), default=0.0)
    in_window = sum(1 for s, _ in ordered if s[1] <= start + seconds)
    errors = sum(report.errors for report in reports)
    first_error = next((r.first_error for r in reports if r.first_error), None)
    if len(reports) < workers:
        errors += workers - len(reports)
        first_error = first_error or f"only {len(reports)} of {workers} workers reported"
    counts = [len(report.sections) for report in reports]
    mean = statistics.fmean(counts) if counts else 0.0
    return Summary(
        workers=workers,
        seconds=seconds,
        sections_per_second=in_window / seconds,
        handoff_ms=summary_ms(handoffs),
        cross_handoff_ms=summary_ms(cross),
        acquire_wait_ms=summary_ms([s[1] - s[0] for s, _ in ordered]),
        self_reacquire_fraction=self_handoffs / len(handoffs) if handoffs else math.nan,
        ceiling_per_second=1 / statistics.fmean(holds) if holds else math.nan,
        per_worker=counts,
        jain_index=jain(counts),
        spread=max(abs(c / mean - 1) for c in counts) if mean else math.nan,
        cpu_cores=sum(r.cpu_seconds for r in reports) / seconds,
        overlaps=int(overlaps),
        token_inversions=int(inversions),
        errors=errors,
        first_error=first_error,
    )
