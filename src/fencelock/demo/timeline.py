"""The demo's picture: an SVG timeline, one panel per round, wrapped in an HTML page.

Pure functions from a recorded :class:`~fencelock.demo.model.Trace` to text:
one row per worker; lease holds as bars labelled with their tokens; SIGSTOP
pauses hatched in red; the part of a lease a frozen worker still believed in
after it expired drawn dashed; every write marked (sale, seat sold twice, stale
write rejected) and each bad write linked to the sale it collided with.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from html import escape

from fencelock.demo.model import Hold, Pause, Trace, Write

WIDTH = 1240
LEFT = 112  # room for the row labels
RIGHT = 28
ROW = 50
BAR = 18
PAUSE_BOX = 26
PANEL_HEAD = 60
AXIS = 34
GAP = 26
TOP = 72
LEGEND = 64
LEGEND_COLUMN = 250

INK = "#1f2937"
MUTED = "#6b7280"
WAIT = "#cbd5e1"
GRID = "#e5e7eb"
HOLD = "#3b6fb6"
GHOST = "#dbe6f6"
PAUSE = "#dc2626"
SOLD = "#16a34a"
DOUBLE = "#dc2626"
REJECTED = "#d97706"

FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', Helvetica, Arial, sans-serif"


@dataclass(frozen=True)
class Scale:
    """Maps seconds since a panel's start to x pixels; every panel shares ``span``."""

    start: float
    span: float

    def x(self, t: float) -> float:
        """The x pixel of clock reading ``t``."""
        return LEFT + (t - self.start) / self.span * (WIDTH - LEFT - RIGHT)


def render_html(traces: Sequence[Trace], title: str = "fencelock demo: locks vs. fencing") -> str:
    """A self-contained page: a heading, a short explanation and the inline SVG."""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>
<style>
body {{ font-family: {FONT}; color: {INK}; margin: 24px auto; max-width: {WIDTH + 40}px;
       background: #fafafa; }}
p {{ color: #374151; line-height: 1.45; max-width: 980px; margin: 6px 20px; }}
figure {{ margin: 12px 0; background: #fff; border: 1px solid {GRID}; border-radius: 10px;
         padding: 8px 10px; }}
svg {{ width: 100%; height: auto; display: block; }}
</style></head><body>
<p>Worker processes sell the seats of one show, each sale under the lock <code>show/42</code>.
Some are frozen with SIGSTOP (a stop-the-world GC pause) after reading a free seat and before
selling it, for longer than the lease's TTL: the lock passes on and another worker sells that
seat. With <b>locks only</b> the woken worker still sells it: the seat is sold twice. With
<b>locks + fencing</b> the shop checks the token in the sale's own transaction and rejects
the stale write.</p>
<figure>
{render_svg(traces, title)}
</figure>
</body></html>
"""


def render_svg(traces: Sequence[Trace], title: str = "fencelock demo") -> str:
    """The whole picture: title, one panel per trace on a shared time scale, legend."""
    span = max([t.end - t.start for t in traces] + [0.001]) * 1.02
    parts = [_defs(), _title(title, traces)]
    y = float(TOP)
    for trace in traces:
        panel, height = _panel(trace, Scale(trace.start, span), y)
        parts.append(panel)
        y += height + GAP
    parts.append(_legend(y))
    height = y + LEGEND
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" '
        f'width="{WIDTH}" height="{height}" font-family="{escape(FONT)}" '
        f'role="img" aria-label="{escape(title)}">\n' + "\n".join(parts) + "\n</svg>"
    )


def _defs() -> str:
    return f"""<defs>
<pattern id="hatch" width="7" height="7" patternUnits="userSpaceOnUse"
 patternTransform="rotate(45)"><rect width="7" height="7" fill="{PAUSE}" fill-opacity="0.08"/>
<line x1="0" y1="0" x2="0" y2="7" stroke="{PAUSE}" stroke-width="2.2" stroke-opacity="0.7"/>
</pattern>
<marker id="arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7"
 orient="auto-start-reverse"><path d="M0,0 L8,4 L0,8 z" fill="context-stroke"/></marker>
</defs>
<rect width="100%" height="100%" fill="#ffffff"/>"""


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
    stats = ' <tspan fill="#d1d5db">·</tspan> '.join(chips)
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
        fill = "#f8fafc" if n % 2 else "#ffffff"
        parts.append(
            f'<rect x="{LEFT}" y="{y}" width="{WIDTH - LEFT - RIGHT}" height="{ROW}" '
            f'fill="{fill}"/>\n<text x="{LEFT - 12}" y="{y + ROW / 2 + 4.5}" font-size="13" '
            f'fill="{INK}" text-anchor="end">worker {n}</text>'
        )
    return "\n".join(parts)


def tick_step(span: float) -> float:
    """A round tick interval giving about 6-12 ticks over ``span`` seconds."""
    raw = max(span, 1e-3) / 12
    base = 10.0 ** math.floor(math.log10(raw))
    return next(m * base for m in (1, 2, 2.5, 5, 10) if m * base >= raw)


def _axis(scale: Scale, end: float, rows_top: float, rows_height: float) -> str:
    step = tick_step(scale.span)
    bottom = rows_top + rows_height
    parts = [
        f'<line x1="{LEFT}" y1="{bottom}" x2="{WIDTH - RIGHT}" y2="{bottom}" stroke="{MUTED}"/>'
    ]
    for i in range(int(scale.span / step + 1e-9) + 1):
        seconds = i * step
        x = scale.x(scale.start + seconds)
        parts.append(
            f'<line x1="{x:.1f}" y1="{rows_top}" x2="{x:.1f}" y2="{bottom}" stroke="{GRID}" '
            f'stroke-dasharray="2 3"/>\n'
            f'<line x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 5}" stroke="{MUTED}"/>'
            f'\n<text x="{x:.1f}" y="{bottom + 18}" font-size="11" fill="{MUTED}" '
            f'text-anchor="middle">{seconds:g} s</text>'
        )
    end_x = scale.x(end)
    parts.append(
        f'<line x1="{end_x:.1f}" y1="{rows_top}" x2="{end_x:.1f}" y2="{bottom}" '
        f'stroke="{MUTED}" stroke-width="1.2"/>'
    )
    return "\n".join(parts)


def _hold(hold: Hold, scale: Scale, rows_top: float) -> str:
    y = _row_y(hold.worker, rows_top) - BAR / 2
    x0 = scale.x(hold.start)
    safe_end = hold.end if hold.trusted_until is None else min(hold.end, hold.trusted_until)
    x1 = max(scale.x(safe_end), x0 + 1.5)
    parts = [
        f'<rect class="hold" x="{x0:.1f}" y="{y:.1f}" width="{x1 - x0:.1f}" height="{BAR}" '
        f'rx="3" fill="{HOLD}"><title>worker {hold.worker}: token {hold.token}, '
        f"held {hold.end - hold.start:.3f}s</title></rect>"
    ]
    if hold.lost and hold.end > safe_end:
        parts.append(_ghost(x1, scale.x(hold.end), y))
    return "\n".join(parts)


def _hold_label(hold: Hold, scale: Scale, rows_top: float) -> str:
    """``#token`` inside the bar, if it fits (drawn above the pause hatching)."""
    x0 = scale.x(hold.start)
    x1 = scale.x(hold.end if hold.trusted_until is None else min(hold.end, hold.trusted_until))
    if x1 - x0 < 30:
        return ""
    tx, anchor = (x0 + 7, "start") if x1 - x0 > 90 else ((x0 + x1 - 5) / 2, "middle")
    return (
        f'<text x="{tx:.1f}" y="{_row_y(hold.worker, rows_top) + 4:.1f}" font-size="11" '
        f'font-weight="700" fill="#fff" stroke="{HOLD}" stroke-width="2.5" '
        f'paint-order="stroke" text-anchor="{anchor}">#{hold.token}</text>'
    )


def _ghost(x0: float, x1: float, y: float) -> str:
    """The part of a lease its frozen holder still believed in after it expired."""
    return (
        f'<rect class="ghost" x="{x0:.1f}" y="{y + 0.75:.1f}" width="{max(x1 - x0, 0):.1f}" '
        f'height="{BAR - 1.5}" rx="3" fill="{GHOST}" stroke="{HOLD}" stroke-width="1.5" '
        f'stroke-dasharray="4 3"/>'
    )


def _wait(hold: Hold, scale: Scale, rows_top: float) -> str:
    if hold.asked is None or hold.start - hold.asked < 0.002:
        return ""
    y = _row_y(hold.worker, rows_top)
    return (
        f'<line class="wait" x1="{scale.x(hold.asked):.1f}" y1="{y:.1f}" '
        f'x2="{scale.x(hold.start):.1f}" y2="{y:.1f}" stroke="{WAIT}" stroke-width="2" '
        f'stroke-linecap="round"/>'
    )


def _pause(pause: Pause, scale: Scale, rows_top: float) -> str:
    y = _row_y(pause.worker, rows_top) - PAUSE_BOX / 2
    x0, x1 = scale.x(pause.start), scale.x(pause.end)
    return (
        f'<rect class="pause" x="{x0:.1f}" y="{y:.1f}" width="{x1 - x0:.1f}" '
        f'height="{PAUSE_BOX}" fill="url(#hatch)" stroke="{PAUSE}" stroke-width="1.2" rx="2">'
        f"<title>worker {pause.worker} frozen (SIGSTOP) {pause.end - pause.start:.2f}s "
        f"holding token {pause.token}, about to sell seat {pause.seat}</title></rect>"
    )


def _write(write: Write, scale: Scale, rows_top: float) -> str:
    x, y = scale.x(write.at), _row_y(write.worker, rows_top)
    tip = f"worker {write.worker}, token {write.token}: seat {write.seat} {write.outcome}"
    cls = f'class="write {write.outcome}"'
    if write.outcome == "sold":
        return (
            f'<circle {cls} cx="{x:.1f}" cy="{y:.1f}" r="4.5" fill="{SOLD}" stroke="#fff" '
            f'stroke-width="1.5"><title>{tip}</title></circle>'
        )
    return _bad_marker(cls, x, y, _colour(write), tip)


def _colour(write: Write) -> str:
    return DOUBLE if write.outcome == "double" else REJECTED


@dataclass(frozen=True)
class Label:
    """A bold note in the band above a worker's bars; ``x`` is its left edge."""

    worker: int
    x: float
    text: str
    colour: str

    @property
    def width(self) -> float:
        """Estimated rendered width in pixels."""
        return len(self.text) * 6.8


def top_labels(trace: Trace, scale: Scale) -> list[Label]:
    """``SIGSTOP 0.9s`` over each pause and a callout by each bad write, spread apart."""
    labels = [
        Label(p.worker, scale.x(p.start) + 1, f"SIGSTOP {p.end - p.start:.1f}s", PAUSE)
        for p in trace.pauses
    ]
    labels += [_callout(w, scale) for w in trace.writes if w.outcome != "sold"]
    return spread(labels)


def _callout(write: Write, scale: Scale) -> Label:
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


def spread(labels: Sequence[Label]) -> list[Label]:
    """Shift labels right so that none overlaps an earlier one in the same row."""
    placed: list[Label] = []
    ends: dict[int, float] = {}
    for label in sorted(labels, key=lambda lb: (lb.worker, lb.x)):
        x = max(label.x, ends.get(label.worker, -math.inf) + 8)
        placed.append(replace(label, x=x))
        ends[label.worker] = x + label.width
    return placed


def _label(label: Label, rows_top: float) -> str:
    y = _row_y(label.worker, rows_top) - PAUSE_BOX / 2 - 4
    return (
        f'<text class="label" x="{label.x:.1f}" y="{y:.1f}" font-size="11" font-weight="700" '
        f'fill="{label.colour}" stroke="#fff" stroke-width="3" paint-order="stroke">'
        f"{escape(label.text)}</text>"
    )


def _bad_marker(cls: str, x: float, y: float, colour: str, tip: str) -> str:
    return (
        f'<g {cls}><title>{tip}</title><circle cx="{x:.1f}" cy="{y:.1f}" r="8" '
        f'fill="{colour}" stroke="#fff" stroke-width="1.5"/>'
        f'<path d="M{x - 3.5:.1f},{y - 3.5:.1f} L{x + 3.5:.1f},{y + 3.5:.1f} '
        f'M{x + 3.5:.1f},{y - 3.5:.1f} L{x - 3.5:.1f},{y + 3.5:.1f}" stroke="#fff" '
        f'stroke-width="2.2" stroke-linecap="round"/></g>'
    )


def collided_with(write: Write, writes: Sequence[Write]) -> Write | None:
    """The accepted sale of the same seat that a double or rejected write ran into."""
    if write.outcome == "sold":
        return None
    earlier = [
        w for w in writes if w.seat == write.seat and w.outcome != "rejected" and w.at < write.at
    ]
    return max(earlier, key=lambda w: w.at, default=None)


def _link(write: Write, writes: Sequence[Write], scale: Scale, rows_top: float) -> str:
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
        (_bad_marker("", 13, 0, DOUBLE, "seat sold twice"), "seat sold twice"),
        (_bad_marker("", 13, 0, REJECTED, "stale write rejected"), "stale write rejected"),
        (
            f'<path d="M0,4 C8,-8 18,-8 26,4" fill="none" stroke="{MUTED}" '
            'stroke-dasharray="3 3" marker-end="url(#arrow)"/>',
            "collides with",
        ),
    ]


def _legend(top: float) -> str:
    parts = []
    for i, (swatch, label) in enumerate(_legend_items()):
        x, y = LEFT + (i % 4) * LEGEND_COLUMN, top + 18 + (i // 4) * 24
        parts.append(
            f'<g transform="translate({x},{y})">{swatch}<text x="34" y="4.5" '
            f'font-size="12.5" fill="{INK}">{escape(label)}</text></g>'
        )
    return "\n".join(parts)
