"""The metrics in Prometheus's text format, both ways, with no dependency: ``render`` for
a scrape (``serve(port)`` answers them), ``parse`` for ``fencelock stats``, which adds up
the scrapes of many processes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from fencelock.metrics.registry import BUCKETS, Histogram, PrefixMetrics

# (field of PrefixMetrics, metric name without "_total", help): the counters, and the
# histograms, as both this text format and the prometheus_client collector name them.
COUNTERS = (
    ("acquisitions", "fencelock_acquisitions", "Leases granted."),
    ("contended", "fencelock_acquisitions_contended", "Leases granted after a wait."),
    ("timeouts", "fencelock_acquire_timeouts", "Acquisitions given up."),
    ("renewals", "fencelock_renewals", "Renewals the server granted."),
    ("renewal_failures", "fencelock_renewal_failures", "Renewals unanswered or refused."),
    ("fencing_rejections", "fencelock_fencing_rejections", "Stale tokens refused."),
)
HISTOGRAMS = (
    ("acquire_seconds", "fencelock_acquire_seconds", "Time to acquire (granted or not)."),
    ("hold_seconds", "fencelock_hold_seconds", "Time from grant to release or loss."),
)
_COUNTERS = tuple((field, f"{metric}_total", text) for field, metric, text in COUNTERS)
_HISTOGRAMS = HISTOGRAMS
_LOST = "fencelock_leases_lost_total"
_WAITING = "fencelock_waiting"
_TTL = "fencelock_lease_ttl_seconds"
_SAMPLE = re.compile(r"^(?P<metric>[a-z_]+)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")
_LABEL = re.compile(r'(?P<key>[a-z_]+)="(?P<value>(?:[^"\\]|\\.)*)"')


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


_ESCAPED = re.compile(r"\\(.)")


def _unescaped(match: re.Match[str]) -> str:
    return "\n" if match[1] == "n" else match[1]


def _bound(value: float) -> str:
    return "+Inf" if value == math.inf else repr(value)


def render(metrics: Iterable[PrefixMetrics]) -> str:
    """The text format of a scrape (version 0.0.4)."""
    every = list(metrics)
    lines: list[str] = []
    for field, metric, help_text in _COUNTERS:
        lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} counter"]
        lines += [f'{metric}{{prefix="{_quoted(m.prefix)}"}} {getattr(m, field)}' for m in every]
    lines += [f"# HELP {_LOST} Leases lost, by cause.", f"# TYPE {_LOST} counter"]
    for m in every:
        for cause, count in sorted(m.lost.items()):
            lines.append(f'{_LOST}{{prefix="{_quoted(m.prefix)}",cause="{cause}"}} {count}')
    for field, metric, help_text in _HISTOGRAMS:
        lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} histogram"]
        for m in every:
            histogram: Histogram = getattr(m, field)
            label, seen = f'prefix="{_quoted(m.prefix)}"', 0
            for bound, count in zip((*BUCKETS, math.inf), histogram.counts, strict=True):
                seen += count
                lines.append(f'{metric}_bucket{{{label},le="{_bound(bound)}"}} {seen}')
            lines.append(f"{metric}_sum{{{label}}} {histogram.total!r}")
            lines.append(f"{metric}_count{{{label}}} {histogram.count}")
    lines += [f"# HELP {_WAITING} Acquisitions waiting now.", f"# TYPE {_WAITING} gauge"]
    lines += [f'{_WAITING}{{prefix="{_quoted(m.prefix)}"}} {m.waiting}' for m in every]
    lines += [f"# HELP {_TTL} The TTL of the last lease granted.", f"# TYPE {_TTL} gauge"]
    lines += [f'{_TTL}{{prefix="{_quoted(m.prefix)}"}} {m.ttl!r}' for m in every if m.ttl]
    return "\n".join(lines) + "\n"


def parse(text: str, into: dict[str, PrefixMetrics] | None = None) -> dict[str, PrefixMetrics]:
    """The metrics a scrape holds, by prefix, added to ``into`` (so many processes'
    scrapes add up; the TTL is the last one seen). Lines of other metrics are skipped."""
    found = {} if into is None else into
    buckets: dict[tuple[str, str], list[float]] = {}  # cumulative, in the scrape's order
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is None:
            continue
        pairs = _LABEL.finditer(match["labels"] or "")
        labels = {m["key"]: _ESCAPED.sub(_unescaped, m["value"]) for m in pairs}
        prefix = labels.get("prefix")
        if prefix is not None:
            target = found.setdefault(prefix, PrefixMetrics(prefix))
            _add(target, match["metric"], labels, float(match["value"]), buckets)
    for (prefix, field), cumulative in buckets.items():
        histogram: Histogram = getattr(found[prefix], field)
        before = 0.0
        for index, seen in enumerate(cumulative[: len(histogram.counts)]):
            histogram.counts[index] += int(seen - before)
            before = seen
    return found


_COUNTER_FIELDS = {metric: field for field, metric, _ in _COUNTERS}
_HISTOGRAM_FIELDS = {metric: field for field, metric, _ in _HISTOGRAMS}


def _add(
    target: PrefixMetrics,
    metric: str,
    labels: dict[str, str],
    value: float,
    buckets: dict[tuple[str, str], list[float]],
) -> None:
    """One sample of a scrape added to its prefix's metrics (buckets kept aside)."""
    if metric in _COUNTER_FIELDS:
        field = _COUNTER_FIELDS[metric]
        setattr(target, field, getattr(target, field) + int(value))
    elif metric == _LOST:
        cause = labels.get("cause", "other")
        target.lost[cause] = target.lost.get(cause, 0) + int(value)
    elif metric == _WAITING:
        target.waiting += int(value)
    elif metric == _TTL:
        target.ttl = value
    else:
        base, _, part = metric.rpartition("_")
        field = _HISTOGRAM_FIELDS.get(base, "")
        if not field:
            return
        histogram: Histogram = getattr(target, field)
        if part == "sum":
            histogram.total += value
        elif part == "count":
            histogram.count += int(value)
        elif part == "bucket":
            buckets.setdefault((target.prefix, field), []).append(value)
