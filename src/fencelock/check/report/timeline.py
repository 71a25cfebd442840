"""The report's SVG timeline, in the demo's visual language (:mod:`fencelock.toolkit.svg`).

One row per client; each lease a bar from the moment its client believed it held
the lock to the moment it stopped believing; the part of a lease its holder
still believed in after a newer token was issued drawn dashed; under each bar the
lease as the server granted it (:mod:`.grants`); overlaps hatched yellow; writes as
dots and crosses, and on a FAIL each lost write linked to the write that overtook it
(:mod:`.failures`); faults (:mod:`.faults`) hatched (pauses), crossed out (kills) or
as bands across every row (server-wide faults).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape

from fencelock.check.checker import CheckResult, LeaseInterval, Overlap
from fencelock.check.history import History, Op
from fencelock.check.report.failures import RING, overtaken
from fencelock.check.report.faults import client_fault, fault_kind, fault_labels, kill, server_band
from fencelock.check.report.grants import granted, granted_line, renewals, run_ttl
from fencelock.check.report.layout import MARKS, SERVER_LANE, TOP, Layout, layout
from fencelock.check.report.summary import param_text
from fencelock.toolkit import svg
from fencelock.toolkit.palette import (
    DOUBLE,
    ERROR,
    GHOST,
    HOLD,
    INK,
    MUTED,
    PAPER,
    PARTITION,
    PAUSE,
    REJECTED,
    SERVER,
    SERVER_TINT,
    SOLD,
    WAIT,
)
from fencelock.toolkit.scale import LEFT, RIGHT, WIDTH

AXIS = 34
LEGEND_ROW = 22
STALE_CROSS = 5.5  # a stale write's cross: smaller than a violation's
# Overlaps in yellow, not the palette's OVERLAP pink: beside the red "lost" pins and
# violation crosses, pink bands read as more of the same.
OVERLAP_BAND = "#ca8a04"


def render_svg(result: CheckResult, history: History) -> str:
    """The timeline: server lane, one row per client, axis in seconds, legend."""
    lay = layout(history)
    faults = history.of_kind("nemesis")
    server = [f for f in faults if f.process < 0 or f.process not in lay.rows]
    on_clients = [f for f in faults if f.process in lay.rows]
    parts = [_defs(), _caption(result, history), _rows(lay)]
    parts += [server_band(f, lay) for f in server]
    parts.append(svg.axis(lay.scale, TOP, lay.rows_bottom))
    parts += _overlap_shading(result.overlaps, lay)
    parts += [client_fault(f, lay) for f in on_clients if fault_kind(f) != "kill"]
    parts += [_wait(op, lay) for op in history.of_kind("acquire")]
    parts += _leases(result, lay)
    parts += _granted(result, history, lay)
    bad = {id(op) for op in result.violating_writes()}
    parts += [_write(op, lay, id(op) in bad) for op in history.of_kind("write")]
    links, notes = overtaken(result, lay)
    parts += links
    parts += [kill(f, lay) for f in on_clients if fault_kind(f) == "kill"]
    parts += fault_labels(server, on_clients, lay, notes)
    items = _legend_items(bool(links))
    parts.append(svg.legend(items, lay.rows_bottom + AXIS + 14 + 12, LEGEND_ROW, 12))
    height = lay.rows_bottom + AXIS + 12 + LEGEND_ROW * -(-len(items) // 4)
    return svg.document(height, "timeline of the check run", parts)


def _defs() -> str:
    return svg.defs(
        svg.hatch("hatch", PAUSE, size=6, fill_opacity=0.07, stroke_width=1.8, stroke_opacity=0.65),
        svg.hatch(
            "cut",
            PARTITION,
            size=6,
            fill_opacity=0.07,
            stroke_width=1.6,
            stroke_opacity=0.6,
            angle=-45,
        ),
        svg.hatch("server", SERVER, size=8, fill_opacity=0.06, stroke_width=1, stroke_opacity=0.25),
        svg.hatch(
            "overlap", OVERLAP_BAND, size=5, fill_opacity=0.16, stroke_width=1.4, stroke_opacity=0.5
        ),
        svg.ARROW,
    )


def _caption(result: CheckResult, history: History) -> str:
    p = history.params
    lay = layout(history)
    bits = [f"{len(lay.rows)} client processes"]
    if len(lay.slots) < len(lay.rows):
        bits[0] += f" in {len(lay.slots)} rows (a killed client's replacement takes its row)"
    if "ttl" in p:
        bits.append(f"lease TTL {param_text(p['ttl'])}s")
    if "fencing" in p:
        bits.append("fenced resource" if p["fencing"] else "no fencing")
    bits.append(f"{len(result.leases)} leases")
    bits.append("time in seconds from the first event")
    return (
        f'<text x="{LEFT - 100}" y="22" font-size="13" fill="{MUTED}">'
        f"{escape(' · '.join(bits))} · hover for details</text>"
    )


def _rows(lay: Layout) -> str:
    """The servers' lane, then each client's row, named."""
    parts = [
        f'<rect x="{LEFT}" y="{TOP}" width="{WIDTH - LEFT - RIGHT}" height="{SERVER_LANE}" '
        f'fill="{SERVER_TINT}"/>',
        svg.row_label("server", TOP + SERVER_LANE / 2 + 4.5, size=12.5, colour=SERVER),
    ]
    for i, chain in enumerate(lay.slots):
        y = lay.rows_top + i * lay.row
        parts += [svg.stripe(i, y, lay.row), _row_label(chain, y, lay.row)]
    return "\n".join(parts)


def _row_label(chain: Sequence[int], y: float, row: float) -> str:
    """``client 7``, with ``then 10, 11`` below when replacements took the row over."""
    if len(chain) == 1:
        return svg.row_label(f"client {chain[0]}", y + row / 2 + 4.5, cls="row")
    later = ", ".join(str(p) for p in chain[1:3]) + (
        f", +{len(chain) - 3}" if len(chain) > 3 else ""
    )
    tip = f"clients {', '.join(map(str, chain))}: each replaced the one before after a kill"
    return (
        svg.row_label(f"client {chain[0]}", y + row / 2 - 1, cls="row", tip=tip)
        + "\n"
        + svg.row_label(f"then {later}", y + row / 2 + 10.5, size=10, colour=MUTED)
    )


def _overlap_shading(overlaps: Iterable[Overlap], lay: Layout) -> list[str]:
    """The union of each row's overlap intervals: yellow hatched bands behind its bars."""
    spans: dict[int, list[tuple[float, float]]] = {}
    for o in overlaps:
        for process in (o.process_a, o.process_b):
            spans.setdefault(process, []).append((o.start, o.end))
    parts = []
    for process, intervals in spans.items():
        if process not in lay.rows:
            continue
        y = lay.y(process) - lay.row / 2 + 2
        for start, end in _union(intervals):
            x0, x1 = lay.x(start), lay.x(end)
            parts.append(
                f'<rect class="overlap" x="{x0:.1f}" y="{y:.1f}" width="{max(x1 - x0, 1):.1f}" '
                f'height="{lay.row - 4:.1f}" fill="url(#overlap)" stroke="{OVERLAP_BAND}" '
                f'stroke-opacity="0.6"><title>client '
                f"{process} and another client both believed they held the lock "
                f"({end - start:.2f}s)</title></rect>"
            )
    return parts


def _union(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _wait(acquire: Op, lay: Layout) -> str:
    """A thin line while the client waited; failed attempts end in a short tick."""
    if acquire.process not in lay.rows:
        return ""
    x0, x1, y = lay.x(acquire.start), lay.x(acquire.end), lay.y(acquire.process)
    if acquire.result == "ok" and x1 - x0 < 1:
        return ""
    tip = f"client {acquire.process} waited {acquire.end - acquire.start:.3f}s"
    if acquire.result == "ok":
        return MARKS.wait_line(x0, x1, y, tip=tip)
    return (
        f'<g class="wait {acquire.result}"><title>{tip}: {acquire.result}</title>'
        f'{MARKS.wait_line(x0, x1, y, cls="", dash="3 2")}<line x1="{x1:.1f}" y1="{y - 5:.1f}" '
        f'x2="{x1:.1f}" y2="{y + 5:.1f}" stroke="{MUTED}" stroke-width="1.5"/></g>'
    )


def _leases(result: CheckResult, lay: Layout) -> list[str]:
    """Bars (solid while the lease was the newest, dashed after), lost ticks, token labels."""
    superseded: dict[tuple[int, int], float] = {}
    for o in result.overlaps:
        older = (o.process_a, o.token_a) if o.token_a < o.token_b else (o.process_b, o.token_b)
        superseded[older] = min(superseded.get(older, o.start), o.start)
    bars, labels = [], []
    for lease in result.leases:
        if lease.process not in lay.rows:
            continue
        stale_from = superseded.get((lease.process, lease.token), lease.end)
        bars.append(_lease(lease, stale_from, lay))
        labels.append(_token_label(lease, stale_from, lay))
    return bars + labels


def _lease(lease: LeaseInterval, stale_from: float, lay: Layout) -> str:
    x0, y = lay.x(lease.start), lay.y(lease.process) - MARKS.bar / 2
    x1 = max(lay.x(stale_from), x0 + 1.2)
    tip = (
        f"client {lease.process}: token {lease.token}, believed {lease.duration:.3f}s, {lease.fate}"
    )
    parts = [MARKS.bar_rect("lease", x0, x1, y, tip)]
    end = lay.x(lease.end)
    if end > x1 + 0.5:
        parts.append(MARKS.ghost_rect(x1, end, y, f"{tip}; a newer token had been issued"))
    if lease.fate == "lost":
        tip = f"client {lease.process} noticed token {lease.token} was lost"
        parts.append(f'<g class="lost"><title>{tip}</title>{_pin(end, y)}</g>')
    return "\n".join(parts)


def _pin(x: float, top: float) -> str:
    """A red pin through the bar's end: a line under a small downward triangle."""
    return (
        f'<line x1="{x:.1f}" y1="{top - 3:.1f}" x2="{x:.1f}" y2="{top + MARKS.bar + 3:.1f}" '
        f'stroke="{PAUSE}" stroke-width="2"/><path d="M{x - 4:.1f},{top - 7:.1f} '
        f'L{x + 4:.1f},{top - 7:.1f} L{x:.1f},{top - 1:.1f} z" fill="{PAUSE}"/>'
    )


def _granted(result: CheckResult, history: History, lay: Layout) -> list[str]:
    """Each lease as the server granted it (nothing when the run's TTL is not known)."""
    ttl = run_ttl(history)
    if ttl is None:
        return []
    renewed = renewals(history, ttl)
    return [
        granted_line(lease, granted(lease, renewed.get((lease.process, lease.token), []), ttl), lay)
        for lease in result.leases
        if lease.process in lay.rows
    ]


def _token_label(lease: LeaseInterval, stale_from: float, lay: Layout) -> str:
    """``#token`` inside the bar where it fits (long tokens shortened to their last digits)."""
    text = f"#{lease.token}" if lease.token < 100_000 else f"#…{lease.token % 10_000:04d}"
    x0, x1 = lay.x(lease.start), lay.x(lease.end)
    if x1 - x0 < len(text) * 6.3 + 6:
        return ""
    solid = lay.x(stale_from) - x0 >= len(text) * 6.3 + 6
    fill, halo = (PAPER, HOLD) if solid else (HOLD, GHOST)
    y = lay.y(lease.process) + 3.8
    return MARKS.token(text, x0 + 4, y, cls="token", fill=fill, halo=halo)


def _write(op: Op, lay: Layout, violating: bool) -> str:
    """Accepted: a green dot; stale: an orange cross; violating: a red cross; error: grey."""
    if op.process not in lay.rows:
        return ""
    x, y = lay.x(op.end), lay.y(op.process)
    what = {"accepted": "accepted", "stale": "rejected (stale token)"}.get(op.result, op.result)
    seq = f", seq {op.value}" if op.value is not None else ""
    tip = f"client {op.process}, token {op.token}: write {op.key} {what}{seq}"
    if violating:
        return MARKS.cross_mark("write violation", x, y, DOUBLE, tip + " - VIOLATION")
    if op.result == "accepted":
        return MARKS.dot_mark("write accepted", x, y, SOLD, tip)
    if op.result == "stale":
        return MARKS.cross_mark("write stale", x, y, REJECTED, tip, r=STALE_CROSS)
    return (
        f'<circle class="write error" cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{PAPER}" '
        f'stroke="{ERROR}" stroke-width="1.8"><title>{escape(tip)}</title></circle>'
    )


def _legend_items(failed: bool) -> list[tuple[str, str]]:
    """(swatch, label) pairs; each swatch fits a 26 x 16 box around y = 0. ``failed``:
    with the lost write's ring and arrow."""
    box = f'x="0" y="{-MARKS.bar / 2}" width="26" height="{MARKS.bar}" rx="2"'
    return [
        (f'<line x1="0" y1="0" x2="26" y2="0" stroke="{WAIT}" stroke-width="2"/>', "waiting"),
        (
            f'<line x1="0" y1="0" x2="24" y2="0" stroke="{WAIT}" stroke-width="2" '
            f'stroke-dasharray="3 2"/><line x1="24" y1="-5" x2="24" y2="5" stroke="{MUTED}" '
            'stroke-width="1.5"/>',
            "acquire timed out / failed",
        ),
        (f'<rect {box} fill="{HOLD}"/>', "client believed it held (#token)"),
        (
            f'<rect {box} fill="{GHOST}" stroke="{HOLD}" stroke-width="1.3" '
            'stroke-dasharray="4 2.5"/>',
            "still believed after a newer token",
        ),
        (
            f'<line x1="0" y1="0" x2="24" y2="0" stroke="{INK}" stroke-width="2"/>'
            f'<line x1="24" y1="-4" x2="24" y2="4" stroke="{INK}" stroke-width="2"/>',
            "server's grant: TTL, then expiry",
        ),
        (
            f'<line x1="0" y1="0" x2="14" y2="0" stroke="{INK}" stroke-width="2"/>'
            f'<line x1="14" y1="0" x2="26" y2="0" stroke="{MUTED}" stroke-width="2"/>'
            f'<line x1="6" y1="-3" x2="6" y2="3" stroke="{INK}" stroke-width="1"/>',
            "renewed (tick), extended (grey)",
        ),
        (
            f'<rect x="0" y="-9" width="26" height="18" fill="url(#overlap)" '
            f'stroke="{OVERLAP_BAND}" stroke-opacity="0.6"/>',
            "overlap: two believed at once",
        ),
        (_pin(13, -MARKS.bar / 2), "client noticed its lease lost"),
        (f'<circle cx="13" cy="0" r="2.6" fill="{SOLD}"/>', "write accepted"),
        (
            f'<circle cx="13" cy="0" r="4" fill="{PAPER}" stroke="{ERROR}" stroke-width="1.8"/>',
            "write failed (outcome unknown)",
        ),
        (
            MARKS.cross_mark("", 13, 0, REJECTED, "stale write rejected", r=STALE_CROSS),
            "stale write rejected",
        ),
        (MARKS.cross_mark("", 13, 0, DOUBLE, "violation"), "violation (order / sold twice)"),
        *(_failure_items() if failed else []),
        (
            f'<rect x="0" y="-10" width="26" height="20" fill="url(#hatch)" stroke="{PAUSE}"/>',
            "client paused (SIGSTOP)",
        ),
        (
            f'<line x1="13" y1="-10" x2="13" y2="10" stroke="{INK}" stroke-width="2.2"/>'
            f'<line x1="8" y1="-4" x2="18" y2="-4" stroke="{INK}" stroke-width="2.2"/>',
            "client killed (kill -9)",
        ),
        (
            f'<rect x="0" y="-10" width="26" height="20" fill="url(#cut)" stroke="{PARTITION}"/>',
            "client partitioned",
        ),
        (
            f'<rect x="0" y="-10" width="26" height="20" fill="url(#server)" '
            f'stroke="{SERVER}" stroke-dasharray="3 3"/>',
            "server-wide fault",
        ),
    ]


def _failure_items() -> list[tuple[str, str]]:
    """The lost write's ring and the arrow to the write that overtook it."""
    return [
        (
            f'<circle cx="13" cy="0" r="{MARKS.cross + RING:g}" fill="none" stroke="{DOUBLE}" '
            'stroke-width="1.6" stroke-dasharray="2.5 2"/>',
            "lost write (overwritten)",
        ),
        (
            f'<path d="M0,4 C8,-8 18,-8 26,4" fill="none" stroke="{DOUBLE}" '
            'stroke-dasharray="3 3" marker-end="url(#arrow)"/>',
            "overtaken by (the later write)",
        ),
    ]
