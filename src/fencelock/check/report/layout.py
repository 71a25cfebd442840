"""Where the report's timeline puts things: its sizes, the time scale, one row per client.

A client started to replace a killed one takes the killed one's row, so the
picture keeps as many rows as the run kept clients at once. The time axis spans
the run's events, from the first to the last: not the runner's final read, which
waits for the clients to stop and may come long after.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fencelock.check.history import History
from fencelock.check.report.summary import run_start
from fencelock.toolkit.scale import Scale
from fencelock.toolkit.svg import THIN

ROW = 40  # one client's row (up to ROOMY_ROWS rows; thinner beyond)
ROOMY_ROWS = 12
MIN_ROW = 26
FAULT_BOX = 24  # a pause's hatched box (in a full-height row)
SERVER_LANE = 30  # the lane above the clients for server-wide faults
TOP = 40  # the caption above the lanes

MARKS = THIN


@dataclass(frozen=True)
class Layout:
    """Where things go: the time scale and the vertical position of each client's row."""

    scale: Scale
    rows: dict[int, int]  # process -> row index from 0 (a replacement shares its row)
    slots: tuple[tuple[int, ...], ...]  # each row's client ids, the first and its replacements
    end: float

    @property
    def row(self) -> float:
        """The height of one row: thinner when there are many."""
        return max(MIN_ROW, min(ROW, ROW * ROOMY_ROWS / max(len(self.slots), 1)))

    @property
    def box(self) -> float:
        """The height of a client fault's box."""
        return min(FAULT_BOX, self.row - 8)

    @property
    def rows_top(self) -> float:
        """The top of the first client row."""
        return TOP + SERVER_LANE

    @property
    def rows_bottom(self) -> float:
        """The bottom of the last client row."""
        return self.rows_top + max(len(self.slots), 1) * self.row

    def y(self, process: int) -> float:
        """The vertical centre of ``process``'s row."""
        return self.rows_top + self.rows[process] * self.row + self.row / 2

    def x(self, t: float) -> float:
        """The x pixel of clock reading ``t``, kept on the axis (an open lease runs to the
        final read, a lease's expiry may come after the last event)."""
        return self.scale.x(min(max(t, self.scale.start), self.end))


def layout(history: History) -> Layout:
    """The run's time span across the width, and a row for each client and its replacements."""
    start = run_start(history)
    events = [op.end for op in history.ops if op.kind != "read"]
    end = max(events or [op.end for op in history.ops] or [start])
    slots = _slots(history)
    rows = {p: i for i, chain in enumerate(slots) for p in chain}
    chains = tuple(tuple(chain) for chain in slots)
    return Layout(Scale(start, max(end - start, 1e-3) * 1.01), rows, chains, end)


REPLACED_BY = re.compile(r"replaced by client (\d+)")


def _slots(history: History) -> list[list[int]]:
    """Client ids grouped by row: a client started to replace a killed one takes its row.

    The runner says so in the kill's ``detail`` ("... replaced by client 9").
    """
    processes = sorted({op.process for op in history.ops if op.process >= 0})
    successor: dict[int, int] = {}
    for op in history.ops:
        match = REPLACED_BY.search(op.detail) if op.kind in ("nemesis", "crash") else None
        if match and op.process >= 0 and int(match.group(1)) in processes:
            successor.setdefault(op.process, int(match.group(1)))
    replacements = set(successor.values())
    slots = []
    for first in (p for p in processes if p not in replacements):
        chain = [first]
        while chain[-1] in successor and successor[chain[-1]] not in chain:
            chain.append(successor[chain[-1]])
        slots.append(chain)
    placed = {p for chain in slots for p in chain}
    slots += [[p] for p in processes if p not in placed]  # a cycle: should not happen
    return slots
