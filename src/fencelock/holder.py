"""Who holds a lease: the holder's host, PID, process start and program (or a label).

The description travels inside the owner value, after its 40 random hex digits and a
dot, so every backend stores it with the lease in the same atomic write that takes
it, with no schema of its own: ``<40 hex>.<base32 of host, pid, start, command>``.
Base32 (lower case, no padding) keeps the value to letters and digits, safe in a
ZooKeeper node name, a Redis waiter id and an ASCII SQL column. An owner value
without a dot (an older client's) simply has no holder.

The lock store is read by others (every host, every user that can list locks), so the
program is recorded without its arguments, which carry passwords and tokens: the
executable's name, and for an interpreter the script or module it runs (``python3
report.py``, ``python3 -m celery``), or only the option of code given inline (``perl
-e``: :mod:`fencelock.redaction`); ``fencelock run`` and ``elect`` record their
command's program the same way (:func:`set_program`). Anything more only through a
label (``FENCELOCK_LABEL``, :func:`set_label`), with a URL's password and a
``--password=``'s value masked there too.
Only the first :data:`COMMAND_BYTES` bytes are kept. The description is made once per
process (again in a forked child: its PID is new) and again after :func:`set_label`.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import secrets
import socket
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from fencelock.engine.urls import redact
from fencelock.errors import ConfigError
from fencelock.redaction import masked_options, shown_command

__all__ = [
    "UNKNOWN",
    "Holder",
    "contender_of",
    "holder_of",
    "new_identity",
    "owner_value",
    "process_start",
    "process_stat",
    "program_of",
    "set_label",
    "set_program",
]

COMMAND_BYTES = 80
HOST_BYTES = 64
_SEPARATOR = "\x1f"  # between the fields, before encoding


class _ThisProcess:
    """The label, and the encoded description with the PID and label it was made for."""

    label: str | None = os.environ.get("FENCELOCK_LABEL") or None
    program: str | None = None  # set by `fencelock run`: its command's program
    made_for: tuple[int, str | None, str | None] | None = None
    encoded = ""


_this = _ThisProcess()


@dataclass(frozen=True)
class Holder:
    """Where a lease's owner runs, as it said when it took the lease."""

    host: str
    pid: int
    started: float | None  # the process's start, Unix time (None where unknown)
    command: str  # the label the application set, else its program (no arguments)

    def to_dict(self) -> dict[str, object]:
        return {
            "host": self.host,
            "pid": self.pid,
            "started": self.started,
            "command": self.command,
        }

    def short(self) -> str:
        """``host:pid``, as the CLI shows it."""
        return f"{self.host}:{self.pid}"


# Who an owner value without a description is (an older fencelock's, or a contender that
# etcdctl or kazoo put in the line): listed in its place (``lock.contenders()``), unknown.
UNKNOWN = Holder(host="?", pid=0, started=None, command="?")


def set_label(label: str | None) -> None:
    """Name this process in the leases it takes from now on (instead of its program),
    as ``status``, ``list`` and ``top`` show it; None: the program again. The
    ``FENCELOCK_LABEL`` environment variable sets it at start. Every lock reader sees
    it: a URL's password in it is recorded as ``***``."""
    if label is not None and not isinstance(label, str):
        raise ConfigError(f"holder label must be a string or None, got {label!r}")
    _this.label = label or None


def set_program(argv: Sequence[str] | None) -> None:
    """Record the program of ``argv`` (see :func:`program_of`) instead of this process's
    own, as ``fencelock run NAME -- CMD`` does for CMD; None: this process's again."""
    _this.program = program_of(argv) if argv else None


def program_of(argv: Sequence[str]) -> str:
    """What identifies a command without its arguments: ``["python3", "job.py",
    "--token=x"]`` is ``python3 job.py``; ``["python3", "-m", "celery", "worker"]`` is
    ``python3 -m celery``; ``["perl", "-e", CODE]`` is ``perl -e``, inline code never
    shown (:func:`fencelock.redaction.shown_command`, its table of interpreters);
    ``["/usr/bin/rsync", "-a", "src", "dst"]`` is ``rsync``."""
    return shown_command(argv) or os.path.basename(sys.executable) or "python"


def masked(text: str) -> str:
    """``text`` with the password of every URL in it (by the one redaction URLs get
    everywhere, word by word) and the value of every ``--password=``-like option
    replaced by ``***``."""
    return masked_options(re.sub(r"\S+", lambda word: redact(word.group()), text))


def owner_value(identity: str) -> str:
    """``identity`` (the random part) with this process's description after it."""
    pid, label, program = os.getpid(), _this.label, _this.program
    if _this.made_for != (pid, label, program):
        _this.encoded = _encode(_this_process(pid, label, program))
        _this.made_for = (pid, label, program)
    return f"{identity}.{_this.encoded}"


def new_identity(owner: str) -> str:
    """``owner`` with new random digits and the same description (a fresh value for a
    retry that must not be mistaken for the one before)."""
    _, dot, description = owner.partition(".")
    return f"{secrets.token_hex(20)}{dot}{description}"


def holder_of(owner: str | None) -> Holder | None:
    """The description in an owner value, or None if it carries none (or is not ours)."""
    if owner is None:
        return None
    _, dot, encoded = owner.partition(".")
    if not dot:
        return None
    try:
        padded = encoded.upper() + "=" * (-len(encoded) % 8)
        fields = base64.b32decode(padded).decode("utf-8", "replace").split(_SEPARATOR)
        host, pid, started, command = fields
        return Holder(host, int(pid), float(started) if started else None, command)
    except (binascii.Error, ValueError):
        return None


def contender_of(owner: str) -> Holder:
    """The description in a contender's owner value; :data:`UNKNOWN` if it has none."""
    return holder_of(owner) or UNKNOWN


def _encode(holder: Holder) -> str:
    started = "" if holder.started is None else f"{holder.started:.0f}"
    text = _SEPARATOR.join((holder.host, str(holder.pid), started, holder.command))
    return base64.b32encode(text.encode()).decode().rstrip("=").lower()


def _this_process(pid: int, label: str | None, program: str | None) -> Holder:
    if label is not None:
        command = masked(label)
    else:
        command = program or program_of(getattr(sys, "orig_argv", None) or sys.argv)
    return Holder(
        _shortened(socket.gethostname(), HOST_BYTES),
        pid,
        process_start(pid),
        _shortened(command, COMMAND_BYTES),
    )


def _shortened(text: str, limit: int) -> str:
    return text.replace(_SEPARATOR, " ").encode()[:limit].decode("utf-8", "ignore")


def process_stat(pid: int) -> tuple[str, int] | None:
    """The process's state letter (field 3 of /proc/PID/stat) and its start in clock
    ticks since boot (field 22), as this process's /proc shows them; None if unreadable.

    The start ticks tell two processes under one PID apart, and no clock step moves
    them (unlike :func:`process_start`, which adds the wall-clock boot time).
    """
    try:
        with open(f"/proc/{pid}/stat") as stat:
            # The command (field 2) may hold spaces and parentheses: split after the last ")".
            fields = stat.read().rsplit(")", 1)[1].split()
        return fields[0], int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def process_start(pid: int) -> float | None:
    """The process's start time, Unix time, from /proc (Linux); None elsewhere. For
    display only: it moves with the wall clock (btime), so it proves nothing."""
    stat = process_stat(pid)
    if stat is None:
        return None
    try:
        with open("/proc/stat") as system:
            boot = next(int(line.split()[1]) for line in system if line.startswith("btime "))
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return boot + stat[1] / os.sysconf("SC_CLK_TCK")


def age(started: float | None, now: float | None = None) -> float | None:
    """Seconds since ``started`` (a Unix time), or None."""
    if started is None:
        return None
    return max((time.time() if now is None else now) - started, 0.0)
