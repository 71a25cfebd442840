"""Stop-the-world pauses: SIGSTOP a worker, later SIGCONT it.

A frozen worker's renewer thread is frozen too, so its lease runs out. One
care: if the renewer happened to be inside a write transaction on the lock
database, freezing it there would block every other process for the whole
pause. :meth:`Freezer.freeze` stops the worker, checks that the database is
not write-locked, and otherwise lets it run a moment and tries again.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import time
from pathlib import Path

from fencelock import clock
from fencelock.demo.model import DemoError

ATTEMPTS = 200


class Freezer:
    """Freezes and thaws worker processes that share the lock database at ``locks_path``."""

    def __init__(self, locks_path: Path) -> None:
        self._probe = sqlite3.connect(str(locks_path), timeout=0, isolation_level=None)

    def freeze(self, pid: int) -> float:
        """SIGSTOP ``pid`` at a moment it holds no write lock; the time it stopped."""
        for _ in range(ATTEMPTS):
            os.kill(pid, signal.SIGSTOP)
            _wait_stopped(pid)
            if self._database_free():
                return clock.now()
            os.kill(pid, signal.SIGCONT)
            time.sleep(0.001)
        raise DemoError(f"could not freeze worker pid {pid} outside a lock transaction")

    @staticmethod
    def thaw(pid: int) -> float:
        """SIGCONT ``pid``; the time it was let go."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
        return clock.now()

    def close(self) -> None:
        """Close the probe connection."""
        self._probe.close()

    def _database_free(self) -> bool:
        try:
            self._probe.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:
            return False
        self._probe.execute("ROLLBACK")
        return True


def _wait_stopped(pid: int, limit: float = 1.0) -> None:
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
