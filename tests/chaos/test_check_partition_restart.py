"""``fencelock check --nemesis partition-restart``: a holder cut off from its server, the
server SIGKILLed and started again. PostgreSQL's advisory locks die with the server, so
the next client gets in while the cut-off holder still trusts its lease; with fencing
the resource loses nothing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.chaos.check_runs import check_cli, processes_mentioning

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGKILL, /proc"),
    pytest.mark.timeout(200),
]


def test_fencing_keeps_the_resource_safe_when_a_cut_off_holders_server_restarts(
    tmp_path: Path,
) -> None:
    run = check_cli(
        tmp_path, "--servers", "advisory", "--nemesis", "partition-restart", "--seed", "1",
        "--duration", "8", "--ttl", "1", "--work", "0.8", "--clients", "4",
        timeout=180,
    )  # fmt: skip
    assert not processes_mentioning(str(tmp_path)), "processes left behind"
    assert run.code == 0, run.describe()
    assert run.result["token_violations"] == []
    assert run.result["invariant"]["lost_updates"] == 0, run.describe()
    assert run.counts["faults"] >= 1, run.describe()
    assert run.counts["accepted_writes"] >= 3, run.describe()
