"""``fencelock check --workload barrier``: rounds of a barrier of every client.

No party passes a round before every party has arrived, with clients killed after
passing (their replacements join the latest round as parties) or paused (everyone
waits for them). A barrier that opens early is caught: one that opens at once,
driven through the workload's own accounting, fails the invariant."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from fencelock.check.checker import barrier_check
from fencelock.check.history import Op
from fencelock.check.workloads import (
    BarrierWorker,
    Channel,
    ClientSpec,
    connect_resource,
    create_resource,
    final_read,
)
from tests.chaos.check_runs import Run, backend_args, check_cli, processes_mentioning

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGSTOP, /proc"),
    pytest.mark.timeout(150),
]

QUICK = ("--workload", "barrier", "--duration", "5", "--ttl", "0.5", "--work", "0.03")


def _run(tmp_path: Path, *args: str) -> Run:
    run = check_cli(tmp_path, *backend_args("sqlite", tmp_path), *args, *QUICK)
    assert not processes_mentioning(str(tmp_path)), "processes left behind"
    return run


@pytest.mark.parametrize("nemesis", ["kill", "pause"])
def test_no_party_passes_before_all_arrived(tmp_path: Path, nemesis: str) -> None:
    run = _run(tmp_path, "--nemesis", nemesis, "--seed", "3", "--clients", "4")
    assert run.code == 0, run.describe()
    invariant = run.result["invariant"]
    assert invariant["holds"] is True, run.describe()
    assert invariant["early"] == [], run.describe()
    assert invariant["parties"] == 4
    assert invariant["rounds"] >= 3, run.describe()
    assert invariant["passes"] >= 4 * 3, run.describe()
    assert run.counts["faults"] >= 1, run.describe()


class _OpensAtOnce:
    """A broken barrier: every party passes as it arrives."""

    def wait(self, timeout: float | None = None) -> bool:
        return True


class _BrokenClient:
    def barrier(self, name: str, parties: int) -> _OpensAtOnce:
        return _OpensAtOnce()


def test_a_barrier_that_opens_early_fails_the_check(tmp_path: Path) -> None:
    resource = tmp_path / "resource.db"
    create_resource(resource)
    spec = ClientSpec(
        client=0,
        url="memory://unused",
        workload="barrier",
        lock_name="b",
        resource=str(resource),
        history=str(tmp_path / "history-0.jsonl"),
        ttl=0.5,
        work=0.0,
        fencing=False,
        seed=1,
        parties=3,
    )
    db, out = connect_resource(resource), Channel(spec)
    try:
        worker = BarrierWorker(spec, _BrokenClient(), db, out)  # type: ignore[arg-type]
        worker.run(deadline=0.0)  # the run's setup only: no round
        worker._round(0, timeout=1.0, last=False)
    finally:
        db.close()
        out.close()
    key, value = final_read(resource, "barrier")
    assert key == "rounds"
    assert json.loads(value)["early"] == ["client 0 passed round 0 with 1 arrived"]
    verdict = barrier_check([Op(-1, "read", 1.0, 1.0, "ok", key=key, value=value)])
    assert not verdict.holds
    assert "1 pass before all parties arrived" in verdict.explain()
    fine = barrier_check(
        [
            Op(
                -1,
                "read",
                1.0,
                1.0,
                "ok",
                key=key,
                value=value.replace(
                    '"early":["client 0 passed round 0 with 1 arrived"]', '"early":[]'
                ),
            )
        ]
    )
    assert fine.holds
    assert not barrier_check([]).holds  # no final read: nothing can be said
