"""Helpers for the ``fencelock check`` chaos tests: run the CLI, read its JSON, find leftovers."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FENCELOCK = Path(sys.executable).parent / "fencelock"


@dataclass
class Run:
    code: int
    doc: dict[str, Any]
    stderr: str
    report: Path

    @property
    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = self.doc["counts"]
        return counts

    @property
    def result(self) -> dict[str, Any]:
        result: dict[str, Any] = self.doc["result"]
        return result

    def describe(self) -> str:
        result = json.dumps(self.doc.get("result", {}), indent=1)[:3000]
        return f"exit {self.code}\n{result}\n{self.stderr[-3000:]}"


def backend_args(backend: str, tmp: Path) -> list[str]:
    if backend == "sqlite":
        return ["--url", f"sqlite:///{tmp / 'locks.db'}"]
    return ["--servers", backend]


def check_cli(tmp: Path, *args: str, timeout: float = 120) -> Run:
    """``fencelock check ARGS --json --report TMP/report``; its exit code and JSON."""
    report = tmp / "report"
    done = subprocess.run(
        [str(FENCELOCK), "check", *args, "--json", "--report", str(report)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    doc = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}
    return Run(done.returncode, doc, done.stderr, report)


PR_SET_CHILD_SUBREAPER = 36


def children(pid: int) -> list[int]:
    """``pid``'s children, from its own /proc entries (no scan of every process)."""
    found = []
    for listing in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            found += [int(child) for child in listing.read_text().split()]
    return found


def descendants(pid: int) -> list[int]:
    found, todo = [], children(pid)
    while todo:
        child = todo.pop()
        found.append(child)
        todo += children(child)
    return found


def _state_and_args(pid: int) -> tuple[str, str]:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return "gone", ""
    return stat.rsplit(")", 1)[1].split()[0], args.decode(errors="replace")


def processes_mentioning(text: str) -> list[str]:
    """Command lines of live processes in this test process's tree whose arguments
    contain ``text``. While :func:`adopting_orphans` is on, that tree keeps what a
    command it started left behind (re-parented here, not to init)."""
    found = []
    for pid in descendants(os.getpid()):
        state, args = _state_and_args(pid)
        if text in args and state not in ("Z", "gone"):
            found.append(f"{pid}: {args[:200]}")
    return found


@contextlib.contextmanager
def adopting_orphans() -> Iterator[None]:
    """Make this process a child subreaper for the block (Linux): a process orphaned
    below it is re-parented to it, so it stays in this process's tree; the orphans that
    exited are reaped at the end."""
    libc = ctypes.CDLL(None, use_errno=True)
    before = set(children(os.getpid()))
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
    try:
        yield
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
        for pid in set(children(os.getpid())) - before:
            if _state_and_args(pid)[0] == "Z":
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
