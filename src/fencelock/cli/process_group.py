"""CMD's process group for ``fencelock run``: started to die with fencelock, stopped as a whole."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence

from fencelock import clock

_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
# After SIGKILL nothing in the group runs any more; what is still listed is a zombie
# nobody reaps or a process finishing a system call. Wait that long for it, no longer.
_KILL_SETTLE = 5.0
_SETTLE_POLL = 0.01


def _die_with_parent_hook() -> Callable[[], None] | None:
    """A hook for the child, between fork and exec: SIGKILL it when fencelock dies (Linux).

    The kernel sends the signal when the *thread* that forked exits, so spawn from the
    main thread, which lives as long as the process. The hook calls only prctl and
    getppid, which take no lock another thread could hold at the fork.
    """
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
    parent = os.getpid()

    def die_with_parent() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # fencelock died before prctl: no signal will come
            os.kill(os.getpid(), signal.SIGKILL)

    return die_with_parent


def spawn(command: Sequence[str], env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """Start CMD as the leader of a new session and process group; it dies with us."""
    return subprocess.Popen(  # noqa: S603 (the command the user gave, as an argument list)
        command,
        env=env,
        start_new_session=True,
        preexec_fn=_die_with_parent_hook(),  # noqa: PLW1509 - see _die_with_parent_hook
    )


class Watchdog:
    """A process outside CMD's group that SIGKILLs the group if fencelock dies abruptly.

    PDEATHSIG reaches CMD only; what CMD started in the background would outlive a
    SIGKILLed fencelock and act on after the lease expired. The watchdog reads the
    group's id, then waits on a pipe only fencelock writes to: a line means the run
    ended in order, end of file without one means fencelock died. Where no /bin/sh
    can be started (a shell-less container), runs go on without it.
    """

    _SCRIPT = 'read pgid || exit 0; read done || kill -s KILL -- "-$pgid" 2>/dev/null'

    def __init__(self) -> None:
        self._guarding = False
        self._proc: subprocess.Popen[bytes] | None = None
        with contextlib.suppress(OSError):
            self._proc = subprocess.Popen(  # noqa: S603 (a constant script of ours)
                ["/bin/sh", "-c", self._SCRIPT],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )

    def guard(self, pgid: int) -> None:
        self._send(f"{pgid}\n")
        self._guarding = True

    def dismiss(self, gone: bool = True) -> None:
        """Let the watchdog go: without killing if the group is ``gone`` (or was never
        started), else after it SIGKILLs the group."""
        if self._proc is None or self._proc.stdin is None:
            return
        if self._guarding and gone:
            self._send("done\n")
        with contextlib.suppress(BrokenPipeError):
            self._proc.stdin.close()
        self._proc.wait()

    def _send(self, line: str) -> None:
        if self._proc is None or self._proc.stdin is None:
            return
        with contextlib.suppress(BrokenPipeError):
            self._proc.stdin.write(line.encode())
            self._proc.stdin.flush()


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
        self.gone = False  # nothing of the group can run any more

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
            self.gone = True
        else:
            self.gone = not self.alive()
        return self.gone

    def kill_now(self, proc: subprocess.Popen[bytes]) -> None:
        """SIGKILL the whole group at once, then wait until CMD is reaped and nothing of
        the group can run any more (its background children too)."""
        self.killed_at = clock.now()
        self.signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(_KILL_SETTLE)
        while not self.settled():
            time.sleep(_SETTLE_POLL)

    def _reap_adopted(self) -> None:
        # Orphans of the group are re-parented to us when fencelock is PID 1 (a
        # container's init) or a subreaper; unreaped, they would look alive forever.
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-self.pgid, os.WNOHANG)[0] > 0:
                pass
