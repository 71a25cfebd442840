"""The faults on the report's timeline: server-wide bands, boxes on a client's row, kills,
and their labels (``SIGSTOP 1.2s``, ``kill -9``, ``pause redis-7001``)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from html import escape

from fencelock.check.history import Op
from fencelock.check.report.layout import MARKS, SERVER_LANE, TOP, Layout
from fencelock.toolkit.labels import Label, label_text, spread
from fencelock.toolkit.palette import INK, PAPER, PARTITION, PAUSE, SERVER
from fencelock.toolkit.scale import RIGHT, WIDTH


def fault_kind(fault: Op) -> str:
    """pause, kill, partition-restart, partition, clock, restart or other: from the
    nemesis's ``detail``."""
    words = fault.detail.lower().split()
    first = words[0] if words else ""
    for kind in ("pause", "kill", "partition-restart", "partition", "clock", "restart"):
        if first.startswith(kind):
            return kind
    return "other"


def server_band(fault: Op, layout: Layout) -> str:
    """A lane box and a band down every client row for a server-wide fault."""
    x0 = layout.x(fault.start)
    x1 = max(layout.x(fault.end), x0 + 2.5)
    tip = f"{escape(fault.detail)}: {fault.end - fault.start:.2f}s"
    return (
        f'<g class="fault server {fault_kind(fault)}"><title>{tip}</title>'
        f'<rect x="{x0:.1f}" y="{TOP + 4}" width="{x1 - x0:.1f}" height="{SERVER_LANE - 8}" '
        f'rx="2" fill="{SERVER}" fill-opacity="0.75"/>'
        f'<rect x="{x0:.1f}" y="{layout.rows_top}" width="{x1 - x0:.1f}" '
        f'height="{layout.rows_bottom - layout.rows_top}" fill="url(#server)" '
        f'stroke="{SERVER}" stroke-opacity="0.35" stroke-dasharray="3 3"/></g>'
    )


def client_fault(fault: Op, layout: Layout) -> str:
    """A hatched box on the target's row: pause (red), partition (teal), other."""
    kind = fault_kind(fault)
    cut = ("url(#cut)", PARTITION)
    fill, stroke = {
        "pause": ("url(#hatch)", PAUSE),
        "partition": cut,
        "partition-restart": cut,
    }.get(kind, ("url(#server)", SERVER))
    x0, x1 = layout.x(fault.start), layout.x(fault.end)
    y = layout.y(fault.process) - layout.box / 2
    tip = f"{fault.detail}: {fault.end - fault.start:.2f}s"
    return MARKS.box(
        f"fault client {kind}",
        x0=x0,
        x1=x1,
        y=y,
        height=layout.box,
        fill=fill,
        colour=stroke,
        tip=tip,
    )


def kill(fault: Op, layout: Layout) -> str:
    """A dark cross through the row at the moment of the kill."""
    x, y = layout.x(fault.start), layout.y(fault.process)
    h = layout.row / 2 - 3
    return (
        f'<g class="fault client kill"><title>{escape(fault.detail)}</title>'
        f'<line x1="{x:.1f}" y1="{y - h:.1f}" x2="{x:.1f}" y2="{y + h:.1f}" stroke="{INK}" '
        f'stroke-width="2.2"/>'
        f'<line x1="{x - 5:.1f}" y1="{y - h + 6:.1f}" x2="{x + 5:.1f}" y2="{y - h + 6:.1f}" '
        f'stroke="{INK}" stroke-width="2.2"/></g>'
    )


def fault_labels(
    server: Sequence[Op], on_clients: Sequence[Op], layout: Layout, more: Iterable[Label] = ()
) -> list[str]:
    """Notes: ``SIGSTOP 1.2s`` over pauses, ``kill -9`` by kills, server faults in the lane;
    ``more`` notes above the rows (a FAIL's callouts) are spread apart with the faults'."""
    row_labels = list(more)
    for fault in on_clients:
        kind, span = fault_kind(fault), fault.end - fault.start
        text = {
            "pause": f"SIGSTOP {span:.1f}s",
            "kill": "kill -9",
            "partition-restart": f"cut + server kill -9 {span:.1f}s",
        }.get(kind, f"{kind} {span:.1f}s")
        colour = {
            "pause": PAUSE,
            "kill": INK,
            "partition": PARTITION,
            "partition-restart": PARTITION,
        }.get(kind, SERVER)
        row_labels.append(Label(fault.process, layout.x(fault.start) + 1, text, colour))
    parts = [
        label_text(lb, layout.y(lb.row) - layout.box / 2 - 2.5, 10.5)
        for lb in _inside(spread(row_labels))
    ]
    lane = [
        Label(-1, layout.x(f.start) + 3, _server_text(f), PAPER if _wide(f, layout) else SERVER)
        for f in server
    ]
    parts += [
        label_text(lb, TOP + SERVER_LANE / 2 + 4, 11, halo=SERVER if lb.colour == PAPER else PAPER)
        for lb in _without_collisions(lane)
    ]
    return parts


def _inside(labels: Iterable[Label]) -> list[Label]:
    """Labels shifted left where they would run past the right edge."""
    right = WIDTH - RIGHT
    return [replace(lb, x=min(lb.x, right - lb.width)) for lb in labels]


def _without_collisions(labels: Iterable[Label]) -> list[Label]:
    """Labels kept inside the right edge; one that would overlap a kept one is dropped."""
    kept: list[Label] = []
    for label in sorted(_inside(labels), key=lambda lb: lb.x):
        if not kept or label.x >= kept[-1].x + kept[-1].width + 8:
            kept.append(label)
    return kept


def _server_text(fault: Op) -> str:
    """The first clause, without filler: ``pause server a for 2s: SIGSTOP`` -> ``pause a``."""
    head = re.split(r":| \(| while | for ", fault.detail, maxsplit=1)[0]
    text = " ".join(w for w in head.split() if w not in ("server", "of", "the")) or "fault"
    return text if len(text) <= 34 else text[:33] + "…"


def _wide(fault: Op, layout: Layout) -> bool:
    """Whether the fault's lane box is wide enough to hold its label."""
    return layout.x(fault.end) - layout.x(fault.start) > len(_server_text(fault)) * 6.8 + 8
