"""What every form of the report says alike: the run's parameters in order, and the counts."""

from __future__ import annotations

from fencelock.check.checker import CheckResult
from fencelock.check.history import History

PARAM_ORDER = (
    "workload",
    "backend",
    "url",
    "clients",
    "duration",
    "ttl",
    "nemeses",
    "fencing",
    "seed",
)


def count_rows(result: CheckResult) -> list[tuple[str, int]]:
    """The run's counts, labelled, in the order they are shown."""
    c = result.counts
    return [
        ("acquisitions", c.acquisitions),
        ("acquire timeouts", c.acquire_timeouts),
        ("writes accepted", c.accepted_writes),
        ("stale writes rejected", c.stale_writes),
        ("errors", c.errors),
        ("leases lost", c.leases_lost),
        ("crashes", c.crashes),
        ("faults injected", c.faults),
    ]


def ordered_params(history: History) -> dict[str, object]:
    """The run's parameters: the well-known ones first, in ``PARAM_ORDER``, then the rest."""
    known = {k: history.params[k] for k in PARAM_ORDER if k in history.params}
    return known | {k: v for k, v in history.params.items() if k not in known}


def param_text(value: object) -> str:
    """A parameter's value for people: lists joined, booleans as yes or no."""
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) or "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def run_start(history: History) -> float:
    """The clock reading of the first op: time zero of the report."""
    return min((op.start for op in history.ops), default=0.0)
