"""The horizontal frame every timeline shares: the picture's width, its margins, time to x."""

from __future__ import annotations

import math
from dataclasses import dataclass

WIDTH = 1240
LEFT = 112  # room for the row labels
RIGHT = 28


@dataclass(frozen=True)
class Scale:
    """Maps clock readings to x pixels: ``start`` at the left margin, ``span`` seconds wide."""

    start: float
    span: float

    def x(self, t: float) -> float:
        """The x pixel of clock reading ``t``."""
        return LEFT + (t - self.start) / self.span * (WIDTH - LEFT - RIGHT)


def tick_step(span: float) -> float:
    """A round tick interval giving about 6-12 ticks over ``span`` seconds."""
    raw = max(span, 1e-3) / 12
    base = 10.0 ** math.floor(math.log10(raw))
    return next(m * base for m in (1, 2, 2.5, 5, 10) if m * base >= raw)
