"""``fencelock check --servers etcd|zookeeper``: 3-member clusters under real faults.

With fencing the resource stays exact under pauses, kills and a member paused or
killed; without it, holders paused past the servers' own lease time break it (on
etcd that takes a 2 s TTL: it grants leases of at least 2 s, and a shorter pause
is outlived by the lease, as Jepsen's etcd 3.4.3 analysis found with 2 s locks).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.chaos.check_runs import Run, check_cli, processes_mentioning

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGSTOP, /proc"),
    pytest.mark.timeout(200),
]


def _run(tmp_path: Path, kind: str, *args: str) -> Run:
    run = check_cli(tmp_path, "--servers", kind, *args, timeout=180)
    assert not processes_mentioning(str(tmp_path)), "processes left behind"
    return run


@pytest.mark.parametrize("kind", ["etcd", "zookeeper"])
def test_fencing_keeps_the_resource_safe_under_pauses_kills_and_member_faults(
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
    # availability is not the point (a killed etcd leader means an election), progress is
    assert run.counts["accepted_writes"] >= 5, run.describe()


# One kind: that a pause longer than the TTL loses updates without the fence is the
# checker's and the nemesis's doing, shown once per file; the fenced runs above are on
# every kind (and the others' "without" in test_check_runs.py).
@pytest.mark.parametrize(("kind", "ttl"), [("zookeeper", "0.5")])
def test_without_fencing_long_pauses_lose_updates(tmp_path: Path, kind: str, ttl: str) -> None:
    duration = "8" if ttl == "0.5" else "16"
    run = _run(
        tmp_path, kind, "--nemesis", "pause", "--no-fencing", "--seed", "5",
        "--duration", duration, "--ttl", ttl, "--work", "0.03",
    )  # fmt: skip
    assert run.code == 1, run.describe()
    assert run.result["invariant"]["holds"] is False
    assert run.result["invariant"]["lost_updates"] > 0
    assert run.counts["stale_writes"] == 0  # nothing checked the tokens


def test_a_partitioned_zookeeper_holder_notices_the_loss_first(tmp_path: Path) -> None:
    run = _run(
        tmp_path, "zookeeper", "--nemesis", "partition", "--clients", "4",
        "--duration", "12", "--ttl", "0.3", "--work", "0.4",
    )  # fmt: skip
    assert run.code == 0, run.describe()
    assert run.counts["faults"] >= 2, run.describe()
    assert run.counts["leases_lost"] >= 1, run.describe()
    # the client's own clock declared the lease lost before the servers let anyone in
    assert run.result["overlap_count"] == 0, run.describe()


def test_the_clock_nemesis_is_refused_on_monotonic_servers(tmp_path: Path) -> None:
    run = _run(tmp_path, "etcd", "--nemesis", "clock", "--duration", "2")
    assert run.code == 64, run.describe()
    assert "monotonic clock" in run.stderr
