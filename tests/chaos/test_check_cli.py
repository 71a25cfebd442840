"""``fencelock check`` as a command: bad input, unreachable backends, interruption, output."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.chaos.check_runs import FENCELOCK, processes_mentioning

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGSTOP, /proc"),
    pytest.mark.timeout(90),
]


ENV = {k: v for k, v in os.environ.items() if k != "FENCELOCK_URL"}


def _check(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(FENCELOCK), "check", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=ENV,
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--url", "memory://"], "memory:// keeps its locks inside one process"),
        (["--nemesis", "pause,gremlins"], "unknown nemesis 'gremlins'"),
        (["--nemesis", "server"], "needs servers the harness started itself"),
        (["--url", "redis://127.0.0.1:6379/0", "--nemesis", "clock"], "--servers redis"),
        (["--url", "sqlite:///x.db", "--nemesis", "partition"], "sqlite:// has none"),
        (["--servers", "consul"], "--servers must be one of redis, redlock, etcd, zookeeper"),
        (["--servers", "redis", "--url", "redis://127.0.0.1:1/0"], "not both"),
        (["--workload", "queue"], "unknown workload 'queue'"),
        (["--clients", "1"], "at least 2"),
        (["--clients", "many"], "--clients takes a whole number"),
        (["--url", "consul://127.0.0.1:1"], "unknown scheme"),
    ],
)
def test_bad_input_exits_64_with_one_clear_line(args: list[str], says: str) -> None:
    done = _check(*args)
    assert done.returncode == 64, done.stderr
    assert says in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def test_an_unreachable_backend_exits_69(tmp_path: Path) -> None:
    done = _check("--url", "redis://127.0.0.1:1/0", "--duration", "2")
    assert done.returncode == 69, done.stderr
    assert "127.0.0.1:1" in done.stderr
    assert done.stderr.count("\n") == 1


def test_human_output_is_a_table_and_the_report_path(tmp_path: Path) -> None:
    report = tmp_path / "out"
    done = _check(
        "--url", f"sqlite:///{tmp_path / 'locks.db'}", "--clients", "3", "--duration", "2",
        "--ttl", "0.3", "--nemesis", "pause", "--report", str(report),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "PASS" in done.stdout
    assert "fencelock check: register workload" in done.stdout
    assert str(report / "report.html") in done.stdout.replace("\n", "")
    assert (report / "history-runner.jsonl").is_file()
    assert (report / "params.json").is_file()


def _start_long_run(report: Path) -> subprocess.Popen[str]:
    # Its output goes to files: a pipe nobody reads until the end could fill and stop it.
    with report.with_name("stderr.txt").open("w") as err:
        proc = subprocess.Popen(
            [str(FENCELOCK), "check", "--servers", "redis", "--nemesis", "pause,kill,server",
             "--duration", "60", "--ttl", "0.5", "--report", str(report)],
            stdout=subprocess.DEVNULL,
            stderr=err,
            text=True,
        )  # fmt: skip
    deadline = time.monotonic() + 70  # servers and clients start slowly on a loaded machine
    while time.monotonic() < deadline and proc.poll() is None:  # until clients are writing
        # (any client's: the nemesis may kill client 0 before it wrote much)
        written = sum(h.stat().st_size for h in report.glob("history-[0-9]*.jsonl"))
        if written > 2000:
            return proc
        time.sleep(0.1)
    proc.kill()
    proc.wait()
    said = _stderr(report)[-3000:]
    pytest.fail(f"the run did not start within 70 s (exit {proc.returncode}): {said}")


def _stderr(report: Path) -> str:
    return report.with_name("stderr.txt").read_text()


def _wait_gone(text: str, limit: float) -> list[str]:
    deadline = time.monotonic() + limit
    while (left := processes_mentioning(text)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def test_ctrl_c_stops_every_process_and_exits_130(tmp_path: Path, ctrl_c_raises: None) -> None:
    # (with SIGINT handled here, the command starts with it at its default, as from a shell)
    report = tmp_path / "run"
    proc = _start_long_run(report)
    assert processes_mentioning(str(report))  # clients and a redis-server are running
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=30)
    err = _stderr(report)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert _wait_gone(str(report), 1.0) == []


def test_sigterm_also_cleans_up(tmp_path: Path) -> None:
    report = tmp_path / "run"
    proc = _start_long_run(report)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    assert proc.returncode == 130, _stderr(report)
    assert _wait_gone(str(report), 1.0) == []


def test_a_killed_runner_leaves_nothing_behind(tmp_path: Path) -> None:
    """SIGKILL cannot be handled: the reaper process kills what the runner started."""
    report = tmp_path / "run"
    proc = _start_long_run(report)
    proc.kill()
    proc.wait(timeout=30)
    assert _wait_gone(str(report), 10.0) == []
