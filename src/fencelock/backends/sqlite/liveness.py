"""Whether a lease's holder still runs, and whether its expiry is on our clock.

A holder is dead only on positive proof: the lease's row was written in this boot, this
PID namespace and this time namespace, our /proc is our PID namespace's, and the
holder's PID runs no process (or a zombie, or another process: its start in clock ticks
since boot, field 22 of /proc/PID/stat, differs). Its lease may then be taken at once,
with the next token. Nothing else proves a death: not a PID in another namespace, which
names another process here; not a start time derived from the wall clock, which a clock
step moves; not a /proc mounted for another PID namespace. Without proof a lease lasts
its TTL, and a paused (stopped) holder, which still runs, keeps it.

The TTL runs on ``CLOCK_BOOTTIME``, which a time namespace offsets and another host or
boot does not share. A row written in another boot or time namespace (or where either
is unknown) carries an expiry on a clock the waiter cannot read: it is expired only
once an observer on the waiter's clock has seen it unchanged (owner, token and expiry:
every renewal changes the expiry) for the lease's whole TTL (:func:`remaining`).

Everything read from the host goes through :class:`Host`, which tests replace.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, Protocol

from fencelock import clock
from fencelock.holder import process_stat

GONE: Final = "gone"

# A row written by a fencelock that recorded no TTL, from another boot: seen unchanged
# this long (the default TTL) before it is taken.
LEGACY_TTL = 30.0

Process = int | Literal["gone"] | None  # start ticks if it runs, GONE, None: unknown


class Host(Protocol):
    """What the backend reads from the host it runs on."""

    def boot_id(self) -> str | None:
        """This boot's id; None where unknown."""

    def pid_namespace(self) -> str | None:
        """This process's PID namespace (``pid:[4026531836]``); None where unknown."""

    def time_namespace(self) -> str | None:
        """This process's time namespace (``time:[4026531834]``); None where unknown."""

    def proc_matches(self) -> bool:
        """Whether /proc shows this process's PID namespace (its PIDs are ours)."""

    def pid(self) -> int:
        """This process's PID, in its PID namespace."""

    def process(self, pid: int) -> Process:
        """Process ``pid``'s start in clock ticks since boot if it runs, GONE if no
        process runs under ``pid`` (or a zombie), None if it cannot be told."""

    def now(self) -> float:
        """Seconds on this process's ``CLOCK_BOOTTIME``."""

    def exit_notice(self, pid: int, start_ticks: int) -> int | None:
        """A pidfd readable once process ``pid`` (started at ``start_ticks``) exits."""


class ProcHost:
    """The host as Linux's /proc shows it."""

    def boot_id(self) -> str | None:
        try:
            return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
        except OSError:
            return None

    def pid_namespace(self) -> str | None:
        try:
            return os.readlink("/proc/self/ns/pid")
        except OSError:
            return None

    def time_namespace(self) -> str | None:
        try:
            return os.readlink("/proc/self/ns/time")
        except FileNotFoundError:
            # A kernel without time namespaces (before 5.6) has one clock for all.
            return "time:none" if self.pid_namespace() is not None else None
        except OSError:
            return None

    def proc_matches(self) -> bool:
        try:
            return os.readlink("/proc/self") == str(os.getpid())
        except OSError:
            return False

    def pid(self) -> int:
        return os.getpid()

    def process(self, pid: int) -> Process:
        if pid <= 0:
            return None
        stat = process_stat(pid)
        if stat is not None:
            state, ticks = stat
            return GONE if state in ("Z", "X") else ticks  # exited, not yet reaped
        # /proc may hide other users' processes (hidepid): only kill() says none runs.
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return GONE
        except OSError:
            return None
        return None

    def now(self) -> float:
        return clock.now()

    def exit_notice(self, pid: int, start_ticks: int) -> int | None:
        if not hasattr(os, "pidfd_open"):
            return None
        with contextlib.suppress(OSError):
            fd = os.pidfd_open(pid)
            if self.process(pid) == start_ticks:  # the PID was not reused before the fd
                return fd
            os.close(fd)
        return None


@dataclass(frozen=True)
class Here:
    """What this process knows of itself and its host (read once per process)."""

    boot: str | None
    pidns: str | None
    timens: str | None
    proc_matches: bool
    pid: int
    start_ticks: int | None  # None: our /proc cannot show it

    @classmethod
    def of(cls, host: Host) -> Here:
        pid, matches = host.pid(), host.proc_matches()
        started = host.process(pid) if matches else None
        return cls(
            boot=host.boot_id(),
            pidns=host.pid_namespace(),
            timens=host.time_namespace(),
            proc_matches=matches,
            pid=pid,
            start_ticks=started if isinstance(started, int) else None,
        )

    @property
    def clock(self) -> str | None:
        """Which clock this process reads (boot and time namespace); None if unknown."""
        if self.boot is None or self.timens is None:
            return None
        return f"{self.boot} {self.timens}"


@dataclass(frozen=True)
class Recorded:
    """A lease's row as written, and when an observer on our clock first saw it so."""

    owner: str | None
    token: int
    expires_at: float
    boot: str
    ttl: float | None  # this and below None: written by an older fencelock
    timens: str | None
    pidns: str | None  # None: not judged by its process (a lease meant to last its TTL)
    pid: int | None
    start_ticks: int | None
    seen: float | None  # None: not observed as it is now


def shares_clock(row: Recorded, here: Here) -> bool:
    """Whether ``row``'s expiry is on our clock: same known boot and time namespace."""
    if here.boot is None or row.boot != here.boot:
        return False
    if row.ttl is None:  # an older fencelock's, which records no time namespace
        return True
    return here.timens is not None and row.timens == here.timens


def remaining(row: Recorded, here: Here, now: float) -> float | None:
    """How long ``row``'s lease is still held as seen from here; None if it is free
    (released, expired on our clock, or observed unchanged for its whole TTL)."""
    if row.owner is None:
        return None
    if shares_clock(row, here):
        left = row.expires_at - now
    else:
        ttl = LEGACY_TTL if row.ttl is None else row.ttl
        left = ttl if row.seen is None else min(row.seen + ttl - now, ttl)
    return left if left > 0 else None


def judged_here(row: Recorded, here: Here) -> bool:
    """Whether a PID read here can prove ``row``'s holder dead."""
    return (
        row.owner is not None
        and row.pid is not None
        and row.start_ticks is not None
        and here.proc_matches
        and here.boot is not None
        and row.boot == here.boot
        and here.pidns is not None
        and row.pidns == here.pidns
        and here.timens is not None
        and row.timens == here.timens
    )


def dead(row: Recorded, here: Here, process: Process) -> bool:
    """Whether ``row``'s holder is proven gone, ``process`` being what its PID runs."""
    if not judged_here(row, here) or process is None:
        return False
    return process == GONE or process != row.start_ticks
