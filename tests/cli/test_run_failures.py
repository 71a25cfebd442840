"""``fencelock run`` when things go wrong: lost leases, stubborn commands, signals, bad input.

Real processes only. Nothing here waits a fixed time for something to happen: each
test waits for a condition with a generous deadline, so a loaded machine passes too.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fencelock.testing import RedisServer, ServerPool
from tests.cli.conftest import FENCELOCK, fencelock_cmd, running
from tests.polling import wait_until

DEADLINE = 30.0  # seconds; generous, for a loaded 2-core machine


def status(env: dict[str, str], name: str, *url: str) -> dict[str, object]:
    done = fencelock_cmd(env, "status", *url, "--json", name)
    info: dict[str, object] = json.loads(done.stdout)
    return info


def read_pid(path: Path) -> int:
    wait_until(lambda: path.exists() and path.read_text().endswith("\n"), what=f"{path} written")
    return int(path.read_text())


def kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


@contextlib.contextmanager
def runner(env: dict[str, str], *args: str) -> Iterator[subprocess.Popen[str]]:
    """``fencelock ARGS...`` in the background; killed at the end if it is still running."""
    proc = subprocess.Popen(
        [FENCELOCK, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
        proc.communicate(timeout=DEADLINE)


def lose_lease(env: dict[str, str], proc: subprocess.Popen[str], name: str) -> None:
    """Pause ``proc`` until another run has taken ``name`` from it, then resume it."""
    wait_until(lambda: bool(status(env, name).get("held")), what=f"{name} held")
    proc.send_signal(signal.SIGSTOP)
    try:
        taken = fencelock_cmd(env, "run", "--wait", str(DEADLINE), name, "--", "true")
        assert taken.returncode == 0, taken.stderr
    finally:
        proc.send_signal(signal.SIGCONT)


def one_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    with ServerPool.under(tmp_path) as pool:
        yield pool.redis()


def test_options_between_name_and_separator(env: dict[str, str]) -> None:
    done = fencelock_cmd(env, "run", "j/opts", "--ttl", "5", "--grace=2", "--", "echo", "hi")
    assert (done.returncode, done.stdout) == (0, "hi\n"), done.stderr
    inner = fencelock_cmd(
        env, "run", "j/opts", "--ttl", "300", "--", FENCELOCK, "status", "--json", "j/opts"
    )
    assert inner.returncode == 0, inner.stderr
    assert json.loads(inner.stdout)["remaining"] > 30  # the default TTL is 30 s


@pytest.mark.parametrize(
    ("args", "stdout"),
    [
        (["j/legacy", "echo", "a", "--", "b"], "a -- b\n"),
        (["--ttl", "5", "j/legacy", "--", "echo", "--ttl", "--"], "--ttl --\n"),
        (["j/legacy", "--", "--", "sh", "-c", "echo c"], None),
    ],
)
def test_cmd_keeps_its_own_dashes(env: dict[str, str], args: list[str], stdout: str | None) -> None:
    done = fencelock_cmd(env, "run", *args)
    if stdout is None:  # `--` as CMD's name: not found
        assert done.returncode == 127, done.stderr
    else:
        assert (done.returncode, done.stdout) == (0, stdout), done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--wait", "-1", "n", "--", "true"], "--wait must be at least 0"),
        (["--grace", "-1", "n", "--", "true"], "--grace must be at least 0"),
        (["n", "--ttl", "5", "echo", "hi"], "must end with --"),
        (["n", "--ttl", "5"], "must end with --"),
        (["n", "--ttl", "5", "--"], "Missing argument"),
    ],
)
def test_usage_errors_in_cli_words(env: dict[str, str], args: list[str], message: str) -> None:
    done = fencelock_cmd(env, "run", *args)
    assert done.returncode == 64, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_redis_dying_under_a_run_is_one_line_and_exit_76(
    env: dict[str, str], redis: RedisServer, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    url = ("--url", redis.url)
    child = f"echo $$ > {pid_file}; exec sleep 300"
    with runner(
        env, "run", *url, "--ttl", "1", "--grace", "0.4", "r/a", "--", "sh", "-c", child
    ) as proc:
        pgid = read_pid(pid_file)
        try:
            redis.kill()
            _, stderr = proc.communicate(timeout=DEADLINE)
        finally:
            kill_group(pgid)
    assert proc.returncode == 76, stderr
    # stopped inside the lease, before its safe time ran out
    assert "could not be renewed in time" in one_line(stderr)


def test_a_lost_lease_sigkills_a_command_that_ignores_sigterm_at_once(
    env: dict[str, str], tmp_path: Path
) -> None:
    """Another holder may have the lock already: no grace, whatever --grace says."""
    pid_file = tmp_path / "pid"
    child = f"trap '' TERM; echo $$ > {pid_file}; while :; do sleep 0.1; done"
    grace = 4.0
    args = ("run", "--ttl", "10", "--grace", str(grace), "j/grace", "--", "sh", "-c", child)
    with runner(env, *args) as proc:
        pgid = read_pid(pid_file)
        try:
            lose_lease(env, proc, "j/grace")
            resumed = time.monotonic()
            _, stderr = proc.communicate(timeout=DEADLINE)
            took = time.monotonic() - resumed
        finally:
            kill_group(pgid)
    assert proc.returncode == 76, stderr
    assert "lost" in stderr
    assert not running(pgid)
    assert took < grace - 1, f"the command got a grace after the loss: {took:.2f}s"


@pytest.mark.parametrize("ignores_term", [False, True])
def test_what_cmd_left_in_its_group_is_stopped_before_the_release(
    env: dict[str, str], tmp_path: Path, ignores_term: bool
) -> None:
    pid_file, log, writer = tmp_path / "pid", tmp_path / "log", tmp_path / "writer.sh"
    trap = "trap '' TERM\n" if ignores_term else ""
    loop = f"while :; do echo $FENCELOCK_TOKEN >> {log}; sleep 0.02; done"
    writer.write_text(f"{trap}echo $$ > {pid_file}\n{loop}\n")
    child = f"sh {writer} & while [ ! -s {pid_file} ]; do sleep 0.01; done"
    # The grace is long for a writer that obeys SIGTERM: the run must not wait it out.
    grace = "1" if ignores_term else str(DEADLINE * 2)
    args = ("--ttl", str(DEADLINE * 5), "--grace", grace)  # the grace fits in the lease
    with runner(env, "run", *args, "j/left", "--", "sh", "-c", child) as proc:
        grandchild = read_pid(pid_file)
        try:
            _, stderr = proc.communicate(timeout=DEADLINE)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(grandchild, signal.SIGKILL)
    assert proc.returncode == 0, stderr
    assert not running(grandchild), "a process CMD left behind outlived the lease"
    written = log.read_text()
    second = fencelock_cmd(env, "run", "j/left", "--", "true")
    assert second.returncode == 0
    assert log.read_text() == written


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_second_signal_escalates_to_sigkill_after_the_grace(
    env: dict[str, str], tmp_path: Path, signum: signal.Signals
) -> None:
    pid_file, got = tmp_path / "pid", tmp_path / "got"
    child = f"trap 'echo >> {got}' TERM INT; echo $$ > {pid_file}; while :; do sleep 0.1; done"
    with runner(env, "run", "--grace", "1", "j/twice", "--", "sh", "-c", child) as proc:
        pgid = read_pid(pid_file)
        try:
            proc.send_signal(signum)
            wait_until(got.exists, what="CMD to get the first signal")
            proc.send_signal(signum)
            _, stderr = proc.communicate(timeout=DEADLINE)
        finally:
            kill_group(pgid)
    assert proc.returncode == 128 + signal.SIGKILL, stderr
    assert not running(pgid)
    assert status(env, "j/twice")["held"] is False


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_while_waiting_for_the_lock(
    env: dict[str, str], tmp_path: Path, signum: signal.Signals, code: int
) -> None:
    marker = tmp_path / "ran"
    with runner(env, "run", "j/wait", "--", "sleep", "300") as holder:
        wait_until(lambda: bool(status(env, "j/wait").get("held")), what="j/wait held")
        with runner(env, "run", "j/wait", "--", "touch", str(marker)) as waiter:
            wait_until(lambda: status(env, "j/wait").get("waiters") == 1, what="a waiter")
            waiter.send_signal(signum)
            _, stderr = waiter.communicate(timeout=DEADLINE)
        holder.terminate()
        holder.wait(DEADLINE)
    assert waiter.returncode == code, stderr
    assert "waiting for lock 'j/wait'" in one_line(stderr)
    assert not marker.exists()


def test_sigkilled_run_takes_its_command_down(env: dict[str, str], tmp_path: Path) -> None:
    cmd_pid, grandchild_pid = tmp_path / "cmd", tmp_path / "grandchild"
    child = f"sh -c 'echo $$ > {grandchild_pid}; exec sleep 300' & echo $$ > {cmd_pid}; wait"
    with runner(env, "run", "j/kill9", "--", "sh", "-c", child) as proc:
        pids = [read_pid(cmd_pid), read_pid(grandchild_pid)]
        try:
            proc.kill()
            proc.wait(DEADLINE)
            wait_until(lambda: not any(map(running, pids)), what="CMD and its group to die")
        finally:
            kill_group(pids[0])


def test_cmd_dies_with_a_sigkilled_run_even_without_the_watchdog(
    env: dict[str, str], tmp_path: Path
) -> None:
    cmd_pid = tmp_path / "cmd"
    with runner(
        env, "run", "j/pdeath", "--", "sh", "-c", f"echo $$ > {cmd_pid}; exec sleep 300"
    ) as proc:
        pid = read_pid(cmd_pid)
        try:
            (watchdog,) = [p for p in children(proc.pid) if b"read pgid" in cmdline(p)]
            os.kill(watchdog, signal.SIGKILL)
            proc.kill()
            proc.wait(DEADLINE)
            wait_until(
                lambda: not running(pid), what="CMD to die with fencelock (PR_SET_PDEATHSIG)"
            )
        finally:
            kill_group(pid)


def children(parent: int) -> list[int]:
    """``parent``'s children, from its own /proc entries (no scan of every process)."""
    found = []
    for listing in Path(f"/proc/{parent}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            found += [int(child) for child in listing.read_text().split()]
    return found


def cmdline(pid: int) -> bytes:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    return b""
