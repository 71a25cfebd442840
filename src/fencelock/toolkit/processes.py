"""Stop-the-world pauses and kills of the tools' worker processes (SIGSTOP, SIGCONT, SIGKILL).

A frozen process's renewer thread is frozen too, so its lease runs out: that is the
fault both tools show. One care: if the process happened to be inside a write
transaction on an SQLite database the others use (the lock database, the shared
resource), freezing it there would block every other process for the whole pause.
:meth:`ProcessPauser.freeze` stops the process, checks that no such database is
write-locked, and otherwise lets it run a moment and tries again.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path


class ProcessPauser:
    """Freezes processes at a moment none of them holds a write lock on ``databases``."""

    def __init__(self, databases: Iterable[Path], attempts: int) -> None:
        self.attempts = attempts
        self._probes = [
            sqlite3.connect(str(path), timeout=0, isolation_level=None) for path in databases
        ]

    def freeze(self, pid: int) -> bool:
        """SIGSTOP ``pid`` outside any write transaction; False if no attempt found it so.

        Raises ProcessLookupError if ``pid`` does not exist.
        """
        for _ in range(self.attempts):
            os.kill(pid, signal.SIGSTOP)
            wait_stopped(pid)
            if all(_write_lock_free(probe) for probe in self._probes):
                return True
            os.kill(pid, signal.SIGCONT)
            time.sleep(0.001)
        return False

    def close(self) -> None:
        """Close the probe connections."""
        for probe in self._probes:
            probe.close()


def resume(pid: int) -> None:
    """SIGCONT ``pid``, if it still exists."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGCONT)


def kill(proc: subprocess.Popen[bytes], wait: float = 10.0) -> None:
    """SIGKILL ``proc`` if it still runs (resumed first, should it be frozen); reap it."""
    if proc.poll() is None:
        resume(proc.pid)
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(wait)


def wait_stopped(pid: int, limit: float = 1.0) -> None:
    """Wait until the kernel reports ``pid`` as stopped (state T in /proc)."""
    stat = Path(f"/proc/{pid}/stat")
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            state = stat.read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            time.sleep(0.01)  # no /proc here: give the signal a moment
            return
        if state in ("T", "t"):
            return
        time.sleep(0.0005)


def _write_lock_free(probe: sqlite3.Connection) -> bool:
    """True if nobody holds the database's write lock."""
    try:
        probe.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError:
        return False
    probe.execute("ROLLBACK")
    return True
