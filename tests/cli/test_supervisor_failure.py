"""Whatever ends the supervisor of ``fencelock run`` / ``elect``, CMD's whole process
group ends with it, before fencelock exits: a failure inside the supervision loop once
left CMD's background child running beside the next holder (PDEATHSIG reaches CMD
only, and the watchdog was told goodbye)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import running

# fencelock's own main, with a failure injected into the supervision loop once CMD's
# background child is up (the loop sleeps at most 50 ms a turn meanwhile).
INJECTED = """
import sys
from pathlib import Path
from fencelock.cli import main, run_signals

ready = Path(sys.argv.pop(1))
sleep = run_signals.Wakeup.sleep

def failing_sleep(self, timeout):
    if ready.exists() and ready.read_text().strip():
        raise RuntimeError("injected failure in the supervisor loop")
    sleep(self, 0.05 if timeout is None else min(timeout, 0.05))

run_signals.Wakeup.sleep = failing_sleep
sys.argv[0] = "fencelock"
main()
"""


def _group_members(pgid: int) -> list[int]:
    """The processes of group ``pgid`` that can still run (zombies left out)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                members.append(int(entry.name))
    return members


@pytest.mark.parametrize("command", ["run", "elect"])
def test_a_failing_supervisor_leaves_nothing_of_cmds_group_running(
    tmp_path: Path, env: dict[str, str], command: str
) -> None:
    group_file, child_file = tmp_path / "group", tmp_path / "child"
    script = f"echo $$ > {group_file}; sleep 300 >/dev/null 2>&1 & echo $! > {child_file}.tmp; "
    script += f"mv {child_file}.tmp {child_file}; wait"
    args = [command, "--ttl", "5", "jobs/crash", "--", "sh", "-c", script]
    try:
        done = subprocess.run(
            [sys.executable, "-c", INJECTED, str(child_file), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert "injected failure in the supervisor loop" in done.stderr, done.stderr
        assert done.returncode != 0
        pgid, child = int(group_file.read_text()), int(child_file.read_text())
        assert not running(child), "CMD's background child outlived fencelock"
        assert _group_members(pgid) == []
    finally:  # what a failed run left: the sleep, not for 300 s
        with contextlib.suppress(OSError, ValueError):
            for pid in _group_members(int(group_file.read_text())):
                os.kill(pid, signal.SIGKILL)
