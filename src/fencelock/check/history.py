"""The history of a check run: every operation, with its process, times and result.

Every process appends JSON lines to its own file; times come from
:func:`fencelock.clock.now`, one clock for all processes on the host, so the
files merge into one timeline. This module is the contract between the runner
(which records) and the checker and report (which read); it does no I/O beyond
reading and writing those lines.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

Kind = Literal["acquire", "extend", "renew", "write", "release", "lost", "crash", "read", "nemesis"]
# acquire: ok (token set) | timeout | error
# extend:  ok (detail "to 0.734s": the new TTL) | lost | error; the client's extend() call
# renew:   ok (detail "to 1.000s"): the server granted a renewal or extension requested at
#          ``start``; recorded as it settles, on the renewer's thread or extend()'s
# write:   accepted | stale (rejected by the fence) | error
# release: ok | lost (the lease had been lost before release) | error
# lost:    info (the client noticed its lease was lost: renewer, check() or release)
# crash:   info (the process was killed while it held a lease; recorded by the runner)
# read:    ok (value read: the register's final value, or a seat map)
# nemesis: info (a fault started or ended; ``detail`` says which, ``process`` is the target)
Result = Literal["ok", "timeout", "error", "accepted", "stale", "lost", "info"]


@dataclass(frozen=True)
class Op:
    """One operation: ``process`` is the client id (-1 for the runner and its nemeses)."""

    process: int
    kind: Kind
    start: float
    end: float
    result: Result
    token: int | None = None
    key: str | None = None
    value: str | None = None
    detail: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, line: str) -> Op:
        return cls(**json.loads(line))


@dataclass
class History:
    """All operations of a run, sorted by start time, plus the run's parameters."""

    ops: list[Op] = field(default_factory=list)
    params: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.ops.sort(key=lambda op: (op.start, op.end))

    def of_kind(self, kind: Kind) -> list[Op]:
        return [op for op in self.ops if op.kind == kind]

    def processes(self) -> list[int]:
        return sorted({op.process for op in self.ops if op.process >= 0})


class Recorder:
    """Appends one process's operations to its own JSON-lines file."""

    def __init__(self, path: Path) -> None:
        self._file = path.open("a", buffering=1)

    def record(self, op: Op) -> None:
        self._file.write(op.to_json() + "\n")

    def close(self) -> None:
        self._file.close()


def read_history(paths: Iterable[Path], params: dict[str, object] | None = None) -> History:
    """Merge the JSON-lines files of one run (a torn last line of a killed process is skipped)."""
    return History(list(_ops(paths)), dict(params or {}))


def _ops(paths: Iterable[Path]) -> Iterator[Op]:
    for path in paths:
        for line in path.read_text().splitlines():
            try:
                yield Op.from_json(line)
            except (ValueError, TypeError):
                continue
