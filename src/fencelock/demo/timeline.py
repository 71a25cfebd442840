"""The demo's picture: an SVG timeline, one panel per round, wrapped in an HTML page.

Pure functions from a recorded :class:`~fencelock.demo.model.Trace` to text:
one row per worker; lease holds as bars labelled with their tokens; SIGSTOP
pauses hatched in red; the part of a lease a frozen worker still believed in
after it expired drawn dashed; every write marked (sale, seat sold twice, stale
write rejected) and each bad write linked to the sale it collided with. The
marks are :mod:`fencelock.toolkit.svg`'s, shared with ``fencelock check``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from html import escape

from fencelock.demo.model import Hold, Trace, WorkerPause, Wrote
from fencelock.toolkit import svg
from fencelock.toolkit.labels import Label, label_text, spread
from fencelock.toolkit.page import page
from fencelock.toolkit.palette import (
    DOUBLE,
    FAINT,
    FONT,
    GHOST,
    GRID,
    HOLD,
    INK,
    MUTED,
    PAGE,
    PAPER,
    PAUSE,
    PROSE,
    REJECTED,
    SOLD,
    WAIT,
)
from fencelock.toolkit.scale import LEFT, RIGHT, WIDTH, Scale

ROW = 50
PAUSE_BOX = 26
PANEL_HEAD = 60
AXIS = 34
GAP = 26
TOP = 72
LEGEND = 64

MARKS = svg.ROOMY
STYLE = f"""body {{ font-family: {FONT}; color: {INK}; margin: 24px auto; max-width: {WIDTH + 40}px;
       background: {PAGE}; }}
p {{ color: {PROSE}; line-height: 1.45; max-width: 980px; margin: 6px 20px; }}
figure {{ margin: 12px 0; background: {PAPER}; border: 1px solid {GRID}; border-radius: 10px;
         padding: 8px 10px; }}
svg {{ width: 100%; height: auto; display: block; }}
"""
INTRO = """\
<p>Worker processes sell the seats of one show, each sale under the lock <code>show/42</code>.
Some are frozen with SIGSTOP (a stop-the-world GC pause) after reading a free seat and before
selling it, for longer than the lease's TTL: the lock passes on and another worker sells that
seat. With <b>locks only</b> the woken worker still sells it: the seat is sold twice. With
<b>locks + fencing</b> the shop checks the token in the sale's own transaction and rejects
the stale write.</p>
"""


def render_html(traces: Sequence[Trace], title: str = "fencelock demo: locks vs. fencing") -> str:
    """A self-contained page: a heading, a short explanation and the inline SVG."""
    return page(title, STYLE, f"{INTRO}<figure>\n{render_svg(traces, title)}\n</figure>\n")


def render_svg(traces: Sequence[Trace], title: str = "fencelock demo") -> str:
    """The whole picture: title, one panel per trace on a shared time scale, legend."""
    span = max([t.end - t.start for t in traces] + [0.001]) * 1.02
    hatch = svg.hatch(
        "hatch", PAUSE, size=7, fill_opacity=0.08, stroke_width=2.2, stroke_opacity=0.7
    )
    parts = [svg.defs(hatch, svg.ARROW), _title(title, traces)]
    y = float(TOP)
    for trace in traces:
        panel, height = _panel(trace, Scale(trace.start, span), y)
        parts.append(panel)
        y += height + GAP
    parts.append(svg.legend(_legend_items(), y + 18, row=24, size=12.5))
    return svg.document(y + LEGEND, title, parts)


def _title(title: str, traces: Sequence[Trace]) -> str:
    workers = max((t.workers for t in traces), default=0)
    sub = (
        f"{workers} workers · one lock (show/42) · some workers frozen with SIGSTOP "
        "for longer than the lease TTL · time in seconds from the start of each round"
    )
    return (
        f'<text x="{LEFT - 100}" y="32" font-size="22" font-weight="700" fill="{INK}">'
        f"{escape(title)}</text>\n"
        f'<text x="{LEFT - 100}" y="54" font-size="13" fill="{MUTED}">{escape(sub)}</text>'
    )


def _panel(trace: Trace, scale: Scale, top: float) -> tuple[str, float]:
    rows_top = top + PANEL_HEAD
    rows_height = max(trace.workers, 1) * ROW
    parts = [_panel_head(trace, top), _rows(trace.workers, rows_top)]
    parts.append(_axis(scale, trace.end, rows_top, rows_height))
    parts += [_wait(h, scale, rows_top) for h in trace.holds]
    parts += [_hold(h, scale, rows_top) for h in trace.holds]
    parts += [_pause(p, scale, rows_top) for p in trace.pauses]
    parts += [_hold_label(h, scale, rows_top) for h in trace.holds]
    parts += [_link(w, trace.writes, scale, rows_top) for w in trace.writes]
    parts += [_write(w, scale, rows_top) for w in trace.writes]
    parts += [_label(label, rows_top) for label in top_labels(trace, scale)]
    return "\n".join(p for p in parts if p), PANEL_HEAD + rows_height + AXIS


def _panel_head(trace: Trace, top: float) -> str:
    chips = []
    for label, value in trace.stats:
        colour = INK
        if label == "sold twice":
            colour = DOUBLE if value else SOLD
        elif label == "stale writes rejected" and value:
            colour = REJECTED
        chips.append(f'<tspan fill="{colour}" font-weight="700">{value}</tspan> {escape(label)}')
    stats = f' <tspan fill="{FAINT}">·</tspan> '.join(chips)
    return (
        f'<text x="{LEFT - 100}" y="{top + 24}" font-size="17" font-weight="700" '
        f'fill="{INK}">{escape(trace.title)}</text>\n'
        f'<text x="{LEFT - 100}" y="{top + 44}" font-size="12.5" fill="{MUTED}">'
        f"{escape(trace.note)}</text>\n"
        f'<text x="{WIDTH - RIGHT}" y="{top + 24}" font-size="13" fill="{MUTED}" '
        f'text-anchor="end">{stats}</text>'
    )


def _row_y(worker: int, rows_top: float) -> float:
    """The vertical centre of ``worker``'s row (workers are numbered from 1)."""
    return rows_top + (worker - 1) * ROW + ROW / 2


def _rows(workers: int, rows_top: float) -> str:
    parts = []
    for n in range(1, workers + 1):
        y = rows_top + (n - 1) * ROW
        parts.append(svg.stripe(n - 1, y, ROW))
        parts.append(svg.row_label(f"worker {n}", y + ROW / 2 + 4.5))
    return "\n".join(parts)


def _axis(scale: Scale, end: float, rows_top: float, rows_height: float) -> str:
    """The shared axis, and a line where the round ended."""
    bottom = rows_top + rows_height
    end_x = scale.x(end)
    return (
        f"{svg.axis(scale, rows_top, bottom)}\n"
        f'<line x1="{end_x:.1f}" y1="{rows_top}" x2="{end_x:.1f}" y2="{bottom}" '
        f'stroke="{MUTED}" stroke-width="1.2"/>'
    )


def _safe_end(hold: Hold) -> float:
    """Where the lease stopped being safe: its end, or its trust bound if that came first."""
    return hold.end if hold.trusted_until is None else min(hold.end, hold.trusted_until)


def _hold(hold: Hold, scale: Scale, rows_top: float) -> str:
    y = _row_y(hold.worker, rows_top) - MARKS.bar / 2
    x0 = scale.x(hold.start)
    safe_end = _safe_end(hold)
    x1 = max(scale.x(safe_end), x0 + 1.5)
    tip = f"worker {hold.worker}: token {hold.token}, held {hold.end - hold.start:.3f}s"
    parts = [MARKS.bar_rect("hold", x0, x1, y, tip)]
    if hold.lost and hold.end > safe_end:
        parts.append(MARKS.ghost_rect(x1, scale.x(hold.end), y))
    return "\n".join(parts)


def _hold_label(hold: Hold, scale: Scale, rows_top: float) -> str:
    """``#token`` inside the bar, if it fits (drawn above the pause hatching)."""
    x0, x1 = scale.x(hold.start), scale.x(_safe_end(hold))
    if x1 - x0 < 30:
        return ""
    tx, anchor = (x0 + 7, "start") if x1 - x0 > 90 else ((x0 + x1 - 5) / 2, "middle")
    return MARKS.token(f"#{hold.token}", tx, _row_y(hold.worker, rows_top) + 4, anchor=anchor)


def _wait(hold: Hold, scale: Scale, rows_top: float) -> str:
    if hold.asked is None or hold.start - hold.asked < 0.002:
        return ""
    return MARKS.wait_line(scale.x(hold.asked), scale.x(hold.start), _row_y(hold.worker, rows_top))


def _pause(pause: WorkerPause, scale: Scale, rows_top: float) -> str:
    y = _row_y(pause.worker, rows_top) - PAUSE_BOX / 2
    tip = (
        f"worker {pause.worker} frozen (SIGSTOP) {pause.end - pause.start:.2f}s "
        f"holding token {pause.token}, about to sell seat {pause.seat}"
    )
    return MARKS.box(
        "pause",
        x0=scale.x(pause.start),
        x1=scale.x(pause.end),
        y=y,
        height=PAUSE_BOX,
        fill="url(#hatch)",
        colour=PAUSE,
        tip=tip,
    )


def _write(write: Wrote, scale: Scale, rows_top: float) -> str:
    x, y = scale.x(write.at), _row_y(write.worker, rows_top)
    tip = f"worker {write.worker}, token {write.token}: seat {write.seat} {write.outcome}"
    cls = f"write {write.outcome}"
    if write.outcome == "sold":
        return MARKS.dot_mark(cls, x, y, SOLD, tip)
    return MARKS.cross_mark(cls, x, y, _colour(write), tip)


def _colour(write: Wrote) -> str:
    return DOUBLE if write.outcome == "double" else REJECTED


def top_labels(trace: Trace, scale: Scale) -> list[Label]:
    """``SIGSTOP 0.9s`` over each pause and a callout by each bad write, spread apart."""
    labels = [
        Label(p.worker, scale.x(p.start) + 1, f"SIGSTOP {p.end - p.start:.1f}s", PAUSE)
        for p in trace.pauses
    ]
    labels += [_callout(w, scale) for w in trace.writes if w.outcome != "sold"]
    return spread(labels)


def _callout(write: Wrote, scale: Scale) -> Label:
    """Right of the marker, or left of it near the right edge."""
    text = (
        f"seat {write.seat} sold twice"
        if write.outcome == "double"
        else (f"#{write.token} rejected")
    )
    x = scale.x(write.at)
    label = Label(write.worker, x + 6, text, _colour(write))
    if label.x + label.width > WIDTH - RIGHT:
        label = replace(label, x=x - 6 - label.width)
    return label


def _label(label: Label, rows_top: float) -> str:
    return label_text(label, _row_y(label.row, rows_top) - PAUSE_BOX / 2 - 4, 11)


def collided_with(write: Wrote, writes: Sequence[Wrote]) -> Wrote | None:
    """The accepted sale of the same seat that a double or rejected write ran into."""
    if write.outcome == "sold":
        return None
    earlier = [
        w for w in writes if w.seat == write.seat and w.outcome != "rejected" and w.at < write.at
    ]
    return max(earlier, key=lambda w: w.at, default=None)


def _link(write: Wrote, writes: Sequence[Wrote], scale: Scale, rows_top: float) -> str:
    other = collided_with(write, writes)
    if other is None:
        return ""
    x0, y0 = scale.x(other.at), _row_y(other.worker, rows_top)
    x1, y1 = scale.x(write.at), _row_y(write.worker, rows_top)
    colour = _colour(write)
    mid = (x0 + x1) / 2
    lift = 14 if y0 == y1 else 0  # same row: arc over the bars between
    return (
        f'<path class="link" d="M{x0:.1f},{y0:.1f} C{mid:.1f},{y0 - lift:.1f} '
        f'{mid:.1f},{y1 - lift:.1f} {x1 - 8:.1f},{y1:.1f}" fill="none" stroke="{colour}" '
        f'stroke-width="1.4" stroke-dasharray="3 3" marker-end="url(#arrow)" opacity="0.9"/>'
    )


def _legend_items() -> list[tuple[str, str]]:
    """(swatch, label) pairs; each swatch is drawn in a 26 x 16 box around y = 0."""
    box = 'x="0" y="-7" width="26" height="14" rx="3"'
    return [
        (
            f'<line x1="0" y1="0" x2="26" y2="0" stroke="{WAIT}" stroke-width="2"/>',
            "waiting for the lock",
        ),
        (f'<rect {box} fill="{HOLD}"/>', "lease held (#token)"),
        (
            f'<rect {box} fill="{GHOST}" stroke="{HOLD}" stroke-width="1.5" '
            'stroke-dasharray="4 3"/>',
            "lease expired, holder unaware",
        ),
        (f'<rect {box} fill="url(#hatch)" stroke="{PAUSE}"/>', "frozen (SIGSTOP)"),
        (f'<circle cx="13" cy="0" r="4.5" fill="{SOLD}"/>', "seat sold"),
        (MARKS.cross_mark("", 13, 0, DOUBLE, "seat sold twice"), "seat sold twice"),
        (MARKS.cross_mark("", 13, 0, REJECTED, "stale write rejected"), "stale write rejected"),
        (
            f'<path d="M0,4 C8,-8 18,-8 26,4" fill="none" stroke="{MUTED}" '
            'stroke-dasharray="3 3" marker-end="url(#arrow)"/>',
            "collides with",
        ),
    ]
