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
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.cli.conftest import FENCELOCK, fencelock_cmd
from tests.servers import RedisServer

DEADLINE = 30.0  # seconds; generous, for a loaded 2-core machine


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not true after {timeout}s: {what}")
        time.sleep(0.02)


def status(env: dict[str, str], name: str, *url: str) -> dict[str, object]:
    done = fencelock_cmd(env, "status", *url, "--json", name)
    info: dict[str, object] = json.loads(done.stdout)
    return info


def read_pid(path: Path) -> int:
    wait_until(lambda: path.exists() and path.read_text().endswith("\n"), f"{path} written")
    return int(path.read_text())


def running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (a zombie runs no code)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


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
    wait_until(lambda: bool(status(env, name).get("held")), f"{name} held")
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
    server = RedisServer(tmp_path / "redis")
    server.start()
    yield server
    server.stop()


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
        (["--wait", "-1", "n", "--", "true"], "'--wait'"),
        (["--grace", "-1", "n", "--", "true"], "'--grace'"),
        (["n", "--ttl", "5", "echo", "hi"], "must end with --"),
        (["n", "--ttl", "5"], "must end with --"),
        (["n", "--ttl", "5", "--"], "Missing argument"),
    ],
)
def test_usage_errors_in_cli_words(env: dict[str, str], args: list[str], message: str) -> None:
    done = fencelock_cmd(env, "run", *args)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr
