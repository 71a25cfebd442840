"""``fencelock run --max-hold``: a command that outlives it is stopped, exit 76."""

from __future__ import annotations

import time

from tests.cli.conftest import fencelock_cmd


def test_a_command_outliving_max_hold_is_stopped_with_exit_76(env: dict[str, str]) -> None:
    started = time.monotonic()
    done = fencelock_cmd(
        env,
        "run",
        "--ttl",
        "0.6",
        "--max-hold",
        "1.5",
        "--grace",
        "0.2",
        "jobs/mh",
        "--",
        "sleep",
        "60",
    )
    took = time.monotonic() - started
    assert done.returncode == 76, done.stderr
    assert "max_hold (1.5s)" in done.stderr
    assert "the command was stopped" in done.stderr
    # renewed past its 0.6 s TTL; stopped inside the lease, before max_hold ends
    assert 0.9 <= took < 30


def test_a_command_that_ends_in_time_keeps_its_own_exit_status(env: dict[str, str]) -> None:
    done = fencelock_cmd(env, "run", "--max-hold", "30", "jobs/mh2", "--", "sh", "-c", "exit 4")
    assert done.returncode == 4, done.stderr


def test_max_hold_must_be_positive(env: dict[str, str]) -> None:
    done = fencelock_cmd(env, "run", "--max-hold", "0", "jobs/mh3", "--", "true")
    assert done.returncode == 64, done.stderr  # a usage error, as `run --wait -1`
    assert "max-hold" in done.stderr
    assert "Traceback" not in done.stderr
