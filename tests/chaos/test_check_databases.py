"""``fencelock check --servers postgresql|advisory|mysql``: one database server under
real faults. With fencing the resource stays exact under pauses, client kills and the
server paused or killed; without it, a holder paused past its TTL loses updates."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.chaos.check_runs import Run, check_cli, processes_mentioning

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGSTOP, /proc"),
    pytest.mark.timeout(200),
]
KINDS = ["postgresql", "advisory", "mysql"]


def _run(tmp_path: Path, kind: str, *args: str) -> Run:
    run = check_cli(tmp_path, "--servers", kind, *args, timeout=180)
    assert not processes_mentioning(str(tmp_path)), "processes left behind"
    return run


@pytest.mark.parametrize("kind", KINDS)
def test_fencing_keeps_the_resource_safe_under_pauses_kills_and_server_faults(
    tmp_path: Path, kind: str
) -> None:
    run = _run(
        tmp_path, kind, "--nemesis", "pause,kill,server", "--seed", "3",
        "--duration", "8", "--ttl", "0.5", "--work", "0.03",
    )  # fmt: skip
    assert run.code == 0, run.describe()
    assert run.result["token_violations"] == []
    assert run.result["invariant"]["holds"] is True
    assert run.counts["faults"] >= 3, run.describe()
    assert run.counts["accepted_writes"] >= 5, run.describe()


# One kind: that a pause longer than the TTL loses updates without the fence is the
# checker's and the nemesis's doing; the fenced runs above are on every kind.
@pytest.mark.parametrize("kind", ["postgresql"])
def test_without_fencing_long_pauses_lose_updates(tmp_path: Path, kind: str) -> None:
    run = _run(
        tmp_path, kind, "--nemesis", "pause", "--no-fencing", "--seed", "5",
        "--duration", "8", "--ttl", "0.5", "--work", "0.03",
    )  # fmt: skip
    assert run.code == 1, run.describe()
    assert run.result["invariant"]["holds"] is False
    assert run.result["invariant"]["lost_updates"] > 0
    assert run.counts["stale_writes"] == 0  # nothing checked the tokens


def _ops(report: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for path in sorted(report.glob("history-*.jsonl"))
        for line in path.read_text().splitlines()
        if line.startswith("{")
    ]


@pytest.mark.parametrize("kind", ["advisory", "mysql"])
def test_a_holder_hears_the_session_nemesis_end_its_lock_at_once(tmp_path: Path, kind: str) -> None:
    """The session nemesis ends a holder's connection mid-critical-section; the holder's
    lease is lost by the server's hang-up (its reason says so), not found out at a
    renewal or at its release (the nemesis strikes a 0.25-0.75 s hold within tens of
    milliseconds of its start; a renewal's loss gives another reason)."""
    run = _run(
        tmp_path, kind, "--nemesis", "session", "--seed", "1",
        "--duration", "14", "--ttl", "2", "--work", "0.5",
    )  # fmt: skip
    assert run.code == 0, run.describe()
    ops = _ops(run.report)
    struck = {
        op["token"]
        for op in ops
        if op["kind"] == "nemesis" and "none held it" not in op["detail"] and op["token"]
    }
    assert struck, run.describe()
    heard = {
        op["token"]
        for op in ops
        if op["kind"] == "lost" and "another owner may hold" in op["detail"]
    }
    assert struck <= heard, (struck, [op for op in ops if op["kind"] == "lost"])


def test_the_session_nemesis_is_refused_on_zookeeper(tmp_path: Path) -> None:
    run = check_cli(tmp_path, "--servers", "zookeeper", "--nemesis", "session", timeout=60)
    assert run.code == 64, run.describe()
    assert "password" in run.stderr


def test_the_clock_nemesis_is_refused_with_a_reason(tmp_path: Path) -> None:
    run = check_cli(tmp_path, "--servers", "postgresql", "--nemesis", "clock", timeout=60)
    assert run.code == 64, run.describe()
    assert "libfaketime" in run.stderr
