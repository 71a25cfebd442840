"""The JSON form of a check run (``fencelock check --json`` and ``result.json``)."""

from __future__ import annotations

import json
from dataclasses import asdict

from fencelock.check.checker import CheckResult
from fencelock.check.history import History


def to_json(result: CheckResult, history: History) -> dict[str, object]:
    """The run's parameters, the checker's result and the counts, as plain JSON values."""
    params = json.loads(json.dumps(history.params, default=str))
    return {
        "params": params,
        "ok": result.ok,
        "result": result.to_dict(),
        "counts": asdict(result.counts),
    }
