"""``fencelock run --once --at-least``: a cron job that runs on one node only."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from fencelock import clock
from tests.cli.conftest import FENCELOCK, fencelock_cmd
from tests.polling import wait_until


def _taken(env: dict[str, str], name: str) -> bool:
    return "held by" in fencelock_cmd(env, "status", name).stdout


def test_once_skips_quietly_when_another_node_runs_the_job(
    env: dict[str, str], tmp_path: Path
) -> None:
    holder = subprocess.Popen([FENCELOCK, "run", "cron/report", "--", "sleep", "30"], env=env)
    try:
        wait_until(lambda: _taken(env, "cron/report"), what="cron/report taken", interval=0.05)
        marker = tmp_path / "ran"
        done = fencelock_cmd(env, "run", "--once", "cron/report", "--", "touch", str(marker))
        assert done.returncode == 0, done.stderr
        assert done.stderr == ""
        assert not marker.exists()
    finally:
        holder.terminate()
        holder.wait(10)


def test_at_least_keeps_the_name_after_a_fast_job(env: dict[str, str], tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    started = clock.now()
    done = fencelock_cmd(
        env, "run", "--once", "--at-least", "1500ms", "cron/fast", "--", "touch", str(marker)
    )
    assert done.returncode == 0, done.stderr
    assert marker.exists()
    again = tmp_path / "again"
    second = fencelock_cmd(env, "run", "--once", "cron/fast", "--", "touch", str(again))
    if clock.now() - started < 1.4:  # still inside at_least (a loaded machine may be past it)
        assert second.returncode == 0
        assert not again.exists()
    deadline = clock.now() + 20
    while _taken(env, "cron/fast"):
        assert clock.now() < deadline
        time.sleep(0.05)
    assert clock.now() - started >= 1.4
    third = fencelock_cmd(env, "run", "--once", "cron/fast", "--", "touch", str(again))
    assert third.returncode == 0
    assert again.exists()


def test_a_duration_that_is_not_one_is_named(env: dict[str, str]) -> None:
    done = fencelock_cmd(env, "run", "--at-least", "soon", "n", "--", "true")
    assert done.returncode == 64
    assert "--at-least takes a duration (30, 30s, 250ms, 5m, 1h), not 'soon'" in done.stderr
