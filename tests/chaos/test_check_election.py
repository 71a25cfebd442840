"""``fencelock check --workload election``: clients campaign, whoever leads writes the
register with its term as the token, then resigns. Under pauses and kills the fenced
run stays exact (a paused leader's writes are refused once a later term wrote); unfenced,
a paused leader that wakes after being replaced loses an update."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.chaos.check_runs import Run, backend_args, check_cli, processes_mentioning

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGSTOP, /proc"),
    pytest.mark.timeout(150),
]

QUICK = ("--workload", "election", "--duration", "6", "--ttl", "0.5", "--work", "0.03")


def _run(tmp_path: Path, backend: str, *args: str) -> Run:
    run = check_cli(tmp_path, *backend_args(backend, tmp_path), *args)
    assert not processes_mentioning(str(tmp_path)), "processes left behind"
    return run


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_a_deposed_leaders_writes_are_fenced(tmp_path: Path, backend: str) -> None:
    run = _run(tmp_path, backend, "--nemesis", "pause,kill", "--seed", "3", *QUICK)
    assert run.code == 0, run.describe()
    assert run.result["token_violations"] == []
    assert run.result["invariant"]["holds"] is True
    assert run.counts["faults"] >= 3, run.describe()
    assert run.counts["stale_writes"] >= 1, run.describe()  # deposed leaders did write
    assert run.counts["accepted_writes"] >= 10, run.describe()


def test_without_fencing_two_leaders_lose_an_update(tmp_path: Path) -> None:
    run = _run(tmp_path, "sqlite", "--nemesis", "pause", "--no-fencing", "--seed", "5", *QUICK)
    assert run.code == 1, run.describe()
    assert run.result["invariant"]["holds"] is False
    assert run.result["invariant"]["lost_updates"] > 0
    assert run.counts["stale_writes"] == 0  # nothing checked the terms
