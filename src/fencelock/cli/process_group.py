"""CMD's process group for ``fencelock run``: signalled and stopped as a whole."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence

from fencelock import clock

# After SIGKILL nothing in the group runs any more; what is still listed is a zombie
# nobody reaps or a process finishing a system call. Wait that long for it, no longer.
_KILL_SETTLE = 5.0


def spawn(command: Sequence[str], env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """Start CMD as the leader of a new session and process group."""
    return subprocess.Popen(command, env=env, start_new_session=True)


class ProcessGroup:
    """CMD's process group: signalled as a whole, SIGKILLed once its deadline passes.

    Used from the main thread only (signal handlers and the renewer just record
    events), so it needs no lock.
    """

    def __init__(self, pgid: int, grace: float) -> None:
        self.pgid, self.grace = pgid, grace
        self.terminated = False
        self.kill_at: float | None = None
        self.killed_at: float | None = None

    def signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, signum)

    def alive(self) -> bool:
        """Whether anything is left in the group. Call once CMD itself has been reaped."""
        self._reap_adopted()
        try:
            os.killpg(self.pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def terminate(self) -> None:
        """SIGTERM the group (once) and have it SIGKILLed ``grace`` seconds later."""
        if not self.terminated:
            self.terminated = True
            self.signal(signal.SIGTERM)
            self.kill_by(clock.now() + self.grace)

    def kill_by(self, deadline: float) -> None:
        self.kill_at = deadline if self.kill_at is None else min(self.kill_at, deadline)

    def kill_if_due(self) -> None:
        if self.killed_at is None and self.kill_at is not None and clock.now() >= self.kill_at:
            self.killed_at = clock.now()
            self.signal(signal.SIGKILL)

    def until_kill(self) -> float | None:
        """Seconds until the SIGKILL is due; None if none is planned (or it was sent)."""
        if self.kill_at is None or self.killed_at is not None:
            return None
        return max(self.kill_at - clock.now(), 0.0)

    def settled(self) -> bool:
        """Whether nothing of the group can run any more. Call once CMD has been reaped."""
        if self.killed_at is not None and clock.now() - self.killed_at > _KILL_SETTLE:
            return True
        return not self.alive()

    def _reap_adopted(self) -> None:
        # Orphans of the group are re-parented to us when fencelock is PID 1 (a
        # container's init) or a subreaper; unreaped, they would look alive forever.
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-self.pgid, os.WNOHANG)[0] > 0:
                pass
