"""Helpers for the ``fencelock check`` chaos tests: run the CLI, read its JSON, find leftovers."""

from __future__ import annotations

import json
import subprocess
import sys
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


def processes_mentioning(text: str) -> list[str]:
    """Command lines of live processes whose arguments contain ``text``."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (cmdline.parent / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if text in args and state != "Z":
            found.append(f"{cmdline.parent.name}: {args[:200]}")
    return found
