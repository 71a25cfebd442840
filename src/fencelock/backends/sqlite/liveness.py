"""Whether a lease's holder still runs: on the embedded backend every holder is local.

The owner value carries the holder's PID and process start time
(:mod:`fencelock.holder`), and the lease's row the boot and the PID namespace it was
taken in. A holder in this boot and this PID namespace whose PID no longer runs (or is
a zombie, or runs another process: its start time differs) has crashed: its lease may
be taken at once, with the next token. A stopped (paused) holder still runs and keeps
it. A holder in another PID namespace (a container sharing the file) is never judged
by a PID here, which would name another process: its lease runs out by its TTL.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from fencelock.holder import holder_of, process_start


def pid_namespace() -> str | None:
    """This process's PID namespace (``pid:[4026531836]``), None where unknown."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def _local_holder(owner: str | None, namespace: str | None) -> tuple[int, float] | None:
    """The holder's PID and start time, if it is judged here: same PID namespace."""
    if namespace is None or namespace != pid_namespace():
        return None
    holder = holder_of(owner)
    if holder is None or holder.started is None:
        return None
    return holder.pid, holder.started


def _runs(pid: int, started: float) -> bool:
    """Whether ``pid`` is the process that started at ``started`` and has not exited."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    if stat.rpartition(")")[2].split()[0] in ("Z", "X"):  # exited, not yet reaped
        return False
    now_started = process_start(pid)
    return now_started is None or f"{now_started:.0f}" == f"{started:.0f}"


def crashed(owner: str | None, namespace: str | None) -> bool:
    """Whether the lease's holder is known to be gone (never True for a foreign one)."""
    local = _local_holder(owner, namespace)
    return local is not None and not _runs(*local)


def exit_notice(owner: str | None, namespace: str | None) -> int | None:
    """A pidfd that becomes readable when the holder exits, if it is judged here and
    runs; None otherwise (the caller then waits for the TTL, as before)."""
    local = _local_holder(owner, namespace)
    if local is None or not hasattr(os, "pidfd_open"):
        return None
    pid, started = local
    with contextlib.suppress(OSError):
        fd = os.pidfd_open(pid)
        if _runs(pid, started):  # the PID was not reused before the fd was opened
            return fd
        os.close(fd)
    return None
