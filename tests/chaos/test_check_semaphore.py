"""``fencelock check --workload semaphore``: a pool of two places guarded by a semaphore.

Killed holders' permits come back after their TTL (holders still enter after as many
were killed as the pool has places); nobody ever enters a full pool.
Paused holders are another matter: a semaphore has no fencing (its holders overlap by
design), so a holder paused past its TTL is still inside when its permit is given to
another, and the checker says so."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fencelock.check.history import read_history
from tests.chaos.check_runs import Run, backend_args, check_cli, processes_mentioning

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGSTOP, /proc"),
    pytest.mark.timeout(150),
]

QUICK = ("--workload", "semaphore", "--duration", "6", "--ttl", "0.5", "--work", "0.03")


def _run(tmp_path: Path, backend: str, *args: str) -> Run:
    run = check_cli(tmp_path, *backend_args(backend, tmp_path), *args)
    assert not processes_mentioning(str(tmp_path)), "processes left behind"
    return run


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_killed_holders_permits_come_back_and_the_pool_never_overflows(
    tmp_path: Path, backend: str
) -> None:
    run = _run(tmp_path, backend, "--nemesis", "kill", "--seed", "3", *QUICK)
    assert run.code == 0, run.describe()
    invariant = run.result["invariant"]
    assert invariant["holds"] is True
    assert invariant["crowded"] == []
    assert invariant["permits"] == 2
    assert run.counts["crashes"] >= 2, run.describe()  # as many as the pool had places
    assert invariant["entries"] >= 20, run.describe()
    history = read_history(sorted(run.report.glob("history-*.jsonl")))
    crashes = sorted(op.start for op in history.of_kind("crash"))
    entries = [op for op in history.of_kind("write") if op.result == "accepted"]
    # had the killed holders' permits not come back, nobody would enter after the second
    assert any(op.start > crashes[1] for op in entries), run.describe()


def test_a_holder_paused_past_its_ttl_crowds_the_pool(tmp_path: Path) -> None:
    run = _run(tmp_path, "sqlite", "--nemesis", "pause", "--seed", "5", *QUICK)
    assert run.code == 1, run.describe()
    invariant = run.result["invariant"]
    assert invariant["holds"] is False, run.describe()
    assert invariant["crowded"], run.describe()
    assert "entered with 2 inside" in invariant["crowded"][0]
