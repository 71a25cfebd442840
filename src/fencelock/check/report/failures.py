"""What a FAIL lost, on the report's timeline, as the demo shows it: each lost write
(overwritten by a stale client) ringed, and an arrow from it to the write that
overtook it (the same seat sold again, or a stale token accepted after a newer one),
each with a note."""

from __future__ import annotations

from html import escape

from fencelock.check.checker import CheckResult, SeatsCheck
from fencelock.check.history import Op
from fencelock.check.report.layout import MARKS, Layout
from fencelock.toolkit.labels import Label
from fencelock.toolkit.palette import DOUBLE

RING = 3  # the lost write's ring, outside a violation cross's radius


def lost_writes(result: CheckResult) -> list[tuple[Op, Op, str, str]]:
    """(lost write, the write that overtook it, a note for each): a seat sold twice, else
    a token-order violation; one pair per overtaking write."""
    pairs: dict[int, tuple[Op, Op, str, str]] = {}
    if isinstance(result.invariant, SeatsCheck):
        for sale in result.invariant.double_sales:
            first, seat = sale.writes[0], sale.key.removeprefix("seat:")
            for later in sale.writes[1:]:
                note = f"sale #{first.token} lost"
                pairs.setdefault(id(later), (first, later, note, f"seat {seat} sold twice"))
    for v in result.token_violations:
        note = f"write #{v.earlier.token} lost"
        pairs.setdefault(
            id(v.op), (v.earlier, v.op, note, f"#{v.op.token} wrote after #{v.earlier.token}")
        )
    return list(pairs.values())


def overtaken(result: CheckResult, lay: Layout) -> tuple[list[str], list[Label]]:
    """Rings and arrows (drawn) and the notes (spread with the faults' by the caller)."""
    marks: list[str] = []
    notes: list[Label] = []
    for lost, later, lost_note, later_note in lost_writes(result):
        if lost.process not in lay.rows or later.process not in lay.rows:
            continue
        x0, y0 = lay.x(lost.end), lay.y(lost.process)
        x1, y1 = lay.x(later.end), lay.y(later.process)
        marks.append(_ring(x0, y0, f"client {lost.process}: {lost_note} (overwritten)"))
        tip = f"overtaken by client {later.process}: {later_note}"
        marks.append(_arrow(x0=x0, y0=y0, x1=x1, y1=y1, tip=tip))
        notes += [Label(lost.process, x0 + 8, lost_note, DOUBLE)]
        notes += [Label(later.process, x1 + 8, later_note, DOUBLE)]
    return marks, notes


def _ring(x: float, y: float, tip: str) -> str:
    return (
        f'<circle class="lost-write" cx="{x:.1f}" cy="{y:.1f}" r="{MARKS.cross + RING:g}" '
        f'fill="none" stroke="{DOUBLE}" stroke-width="1.6" stroke-dasharray="2.5 2">'
        f"<title>{escape(tip)}</title></circle>"
    )


def _arrow(*, x0: float, y0: float, x1: float, y1: float, tip: str) -> str:
    """The demo's link: a dashed curve, arched over its own row, ending short of the cross."""
    mid = (x0 + x1) / 2
    lift = 14 if y0 == y1 else 0
    end = x1 - MARKS.cross - 1.5 if x1 - x0 > 2 * MARKS.cross else x1
    return (
        f'<path class="link" d="M{x0:.1f},{y0:.1f} C{mid:.1f},{y0 - lift:.1f} '
        f'{mid:.1f},{y1 - lift:.1f} {end:.1f},{y1:.1f}" fill="none" stroke="{DOUBLE}" '
        f'stroke-width="1.4" stroke-dasharray="3 3" marker-end="url(#arrow)" opacity="0.9">'
        f"<title>{escape(tip)}</title></path>"
    )
