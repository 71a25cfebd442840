"""``fencelock run`` end to end, with real processes."""

from __future__ import annotations

import itertools
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from socket import gethostname
from typing import Any

import pytest

from tests.cli.conftest import FENCELOCK, fencelock_cmd, running
from tests.polling import wait_until

CRITICAL = (
    "import os, sys, time\n"
    "from fencelock import clock\n"
    "start = clock.now(); time.sleep(0.03); end = clock.now()\n"
    "with open(sys.argv[1], 'a') as f:\n"
    "    f.write(f\"{start} {end} {os.environ['FENCELOCK_TOKEN']}\\n\")\n"
)


def test_exit_code_and_environment_pass_through(env: dict[str, str]) -> None:
    done = fencelock_cmd(
        env, "run", "jobs/a", "--", "sh", "-c", 'echo "$FENCELOCK_NAME $FENCELOCK_TOKEN"; exit 3'
    )
    assert done.returncode == 3
    assert done.stdout.split() == ["jobs/a", "1"]


def test_concurrent_runs_never_overlap(env: dict[str, str], tmp_path: Path) -> None:
    log = tmp_path / "spans"
    script = tmp_path / "critical.py"
    script.write_text(CRITICAL)
    run = f"{FENCELOCK} run --ttl 5 jobs/x -- {sys.executable} {script} {log}"
    loop = f"for i in 1 2 3; do {run}; done"
    procs = [subprocess.Popen(["sh", "-c", loop], env=env) for _ in range(4)]  # noqa: S607 (the shell from PATH)
    assert [p.wait(60) for p in procs] == [0, 0, 0, 0]
    spans = sorted(tuple(map(float, line.split())) for line in log.read_text().splitlines())
    assert len(spans) == 12
    tokens = [int(t) for _, _, t in spans]
    assert tokens == sorted(set(tokens))
    for (_, end, _), (start, _, _) in itertools.pairwise(spans):
        assert end <= start


def test_no_wait_exits_75_at_once(env: dict[str, str], tmp_path: Path) -> None:
    holder = subprocess.Popen([FENCELOCK, "run", "jobs/b", "--", "sleep", "5"], env=env)
    try:
        _wait_until_held(env, "jobs/b")
        marker = tmp_path / "ran"
        started = time.monotonic()
        done = fencelock_cmd(env, "run", "--no-wait", "jobs/b", "--", "touch", str(marker))
        assert done.returncode == 75
        assert time.monotonic() - started < 3
        assert not marker.exists()
        assert "held by another owner" in done.stderr
        timed = fencelock_cmd(env, "run", "--wait", "0.3", "jobs/b", "--", "true")
        assert timed.returncode == 75
    finally:
        holder.terminate()
        holder.wait(10)


def test_paused_run_loses_lease_and_stops_its_command(env: dict[str, str], tmp_path: Path) -> None:
    survived, sleeper, shell = tmp_path / "survived", tmp_path / "sleeper.pid", tmp_path / "sh.pid"
    child = f"echo $$ > {shell}; sleep 30 & echo $! > {sleeper}; sleep 4; touch {survived}"
    runner = subprocess.Popen(
        [FENCELOCK, "run", "--ttl", "0.5", "--grace", "0.2", "jobs/c", "--", "sh", "-c", child],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    first = _wait_until_held(env, "jobs/c")
    runner.send_signal(signal.SIGSTOP)  # like a long GC pause of the fencelock process
    try:
        second = fencelock_cmd(
            env, "run", "--wait", "5", "jobs/c", "--", "sh", "-c", 'echo "$FENCELOCK_TOKEN"'
        )
        assert second.returncode == 0
        assert int(second.stdout) > first["token"]
    finally:
        runner.send_signal(signal.SIGCONT)
    _, stderr = runner.communicate(timeout=10)
    assert runner.returncode == 76, stderr
    assert "lost while the command ran" in stderr
    # The command's shell is gone (or, stopped too late, touches the file first).
    command = int(shell.read_text())
    wait_until(lambda: not running(command), what="the command to end", interval=0.05)
    assert not survived.exists(), "the command went on after the lease was lost"
    assert sleeper.exists(), "the command never started its background sleep"
    pid = int(sleeper.read_text())
    assert not running(pid), f"a process the command started (pid {pid}) survived"


def test_sigterm_reaches_the_command_and_the_lease_is_released(
    env: dict[str, str], tmp_path: Path
) -> None:
    got = tmp_path / "got-term"
    child = f"trap 'touch {got}; exit 9' TERM; while :; do sleep 0.05; done"
    runner = subprocess.Popen([FENCELOCK, "run", "jobs/d", "--", "sh", "-c", child], env=env)
    _wait_until_held(env, "jobs/d")
    runner.send_signal(signal.SIGTERM)
    assert runner.wait(10) == 9
    assert got.exists()
    status = json.loads(fencelock_cmd(env, "status", "--json", "jobs/d").stdout)
    assert status["held"] is False
    assert status["token"] == 1


def test_status_and_list(env: dict[str, str]) -> None:
    assert fencelock_cmd(env, "status", "jobs/e").stdout.strip() == "jobs/e: never locked"
    holder = subprocess.Popen([FENCELOCK, "run", "jobs/e", "--", "sleep", "5"], env=env)
    try:
        info = _wait_until_held(env, "jobs/e")
        assert info["token"] == 1
        assert 0 < info["remaining"] <= 30
        assert info["holder"]["pid"] == holder.pid
        assert info["holder"]["host"] == gethostname()
        assert info["holder"]["command"] == "sleep"  # CMD's program, never its arguments
        assert 0 <= info["held_for"] < 30
        assert info["waiters"] == 0
        human = fencelock_cmd(env, "status", "jobs/e").stdout
        assert f"held by {gethostname()}:{holder.pid} " in human
        assert "(token 1)" in human
        assert re.search(r" for \d+\.\ds ", human)
        assert "0 waiting" in human
        listed = json.loads(fencelock_cmd(env, "list", "--json", "jobs/").stdout)
        assert [entry["name"] for entry in listed] == ["jobs/e"]
        assert listed[0]["holder"] == info["holder"]
        assert json.loads(fencelock_cmd(env, "list", "--json", "other/").stdout) == []
    finally:
        holder.terminate()
        holder.wait(10)


def test_a_label_names_the_holder_instead_of_its_command(env: dict[str, str]) -> None:
    labelled = dict(env, FENCELOCK_LABEL="nightly-billing")
    holder = subprocess.Popen([FENCELOCK, "run", "jobs/l", "--", "sleep", "5"], env=labelled)
    try:
        info = _wait_until_held(env, "jobs/l")
        assert info["holder"]["command"] == "nightly-billing"
        assert "'nightly-billing'" in fencelock_cmd(env, "status", "jobs/l").stdout
    finally:
        holder.terminate()
        holder.wait(10)


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["run", "--url", "foo://x", "n", "--", "true"], 64, "unknown scheme 'foo'"),
        (["run", "--url", "sqlite:", "n", "--", "true"], 64, "malformed backend URL"),
        (["run", "bad name", "--", "true"], 64, "lock name 'bad name'"),
        (["run", "--ttl", "0", "n", "--", "true"], 64, "ttl must be > 0"),
        (["run", "--wait", "1", "--no-wait", "n", "--", "true"], 64, "--wait excludes"),
        (["run", "--wait", "1", "--once", "n", "--", "true"], 64, "--wait excludes"),
        (
            ["run", "--url", "sqlite:////proc/no/such/dir.db", "n", "--", "true"],
            69,
            "cannot open SQLite database",
        ),
        (["run", "n", "--", "/no/such/program"], 127, "cannot run"),
        (["status", "--url", "nosuch://h", "n"], 64, "unknown scheme"),
    ],
)
def test_bad_input_is_one_clear_line(
    env: dict[str, str], args: list[str], code: int, message: str
) -> None:
    done = fencelock_cmd(env, *args)
    assert done.returncode == code, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def _wait_until_held(env: dict[str, str], name: str) -> dict[str, Any]:
    """``name``'s status (``status --json``) once it is held."""

    def held() -> dict[str, Any]:
        info: dict[str, Any] = json.loads(fencelock_cmd(env, "status", "--json", name).stdout)
        return info if info.get("held") else {}

    return wait_until(held, what=f"{name} held", interval=0.05)
