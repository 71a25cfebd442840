"""Bold notes above a row's marks (``SIGSTOP 0.9s``, ``seat 6 sold twice``), kept apart."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from html import escape

from fencelock.toolkit.palette import PAPER


@dataclass(frozen=True)
class Label:
    """A note in the band above ``row``'s marks; ``x`` is its left edge."""

    row: int
    x: float
    text: str
    colour: str

    @property
    def width(self) -> float:
        """Estimated rendered width in pixels."""
        return len(self.text) * 6.8


def spread(labels: Sequence[Label]) -> list[Label]:
    """Shift labels right so that none overlaps an earlier one in the same row."""
    placed: list[Label] = []
    ends: dict[int, float] = {}
    for label in sorted(labels, key=lambda lb: (lb.row, lb.x)):
        x = max(label.x, ends.get(label.row, -math.inf) + 8)
        placed.append(replace(label, x=x))
        ends[label.row] = x + label.width
    return placed


def label_text(label: Label, y: float, size: float, halo: str = PAPER) -> str:
    """``label`` drawn bold at baseline ``y``, with a halo that keeps it legible over marks."""
    return (
        f'<text class="label" x="{label.x:.1f}" y="{y:.1f}" font-size="{size}" '
        f'font-weight="700" fill="{label.colour}" stroke="{halo}" stroke-width="3" '
        f'paint-order="stroke">{escape(label.text)}</text>'
    )
