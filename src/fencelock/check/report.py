"""The report of a check run: a terminal table, a JSON document and an HTML page.

The HTML page is self-contained (no scripts, no external assets): the run's
parameters, a PASS/FAIL banner saying why, the counts, and an inline SVG
timeline in the demo's visual language (:mod:`fencelock.demo.timeline`): one
row per client; each lease a bar from the moment its client believed it held
the lock to the moment it stopped believing; the part of a lease its holder
still believed in after a newer token was issued drawn dashed; overlaps shaded;
writes as dots and crosses; faults hatched (pauses), crossed out (kills) or as
bands across every row (server-wide faults).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from html import escape
from pathlib import Path

from rich.table import Table

from fencelock.check.checker import CheckResult, Lease, Overlap, SeatsCheck, seconds
from fencelock.check.history import History, Op
from fencelock.demo.timeline import (
    DOUBLE,
    FONT,
    GHOST,
    GRID,
    HOLD,
    INK,
    LEFT,
    MUTED,
    PAUSE,
    REJECTED,
    RIGHT,
    SOLD,
    WAIT,
    WIDTH,
    Label,
    Scale,
    spread,
    tick_step,
)

ROW = 40  # one client's row (up to ROOMY_ROWS rows; thinner beyond)
ROOMY_ROWS = 12
MIN_ROW = 26
BAR = 12  # a lease bar
FAULT_BOX = 24  # a pause's hatched box (in a full-height row)
SERVER_LANE = 30  # the lane above the clients for server-wide faults
TOP = 40  # the caption above the lanes
AXIS = 34
LEGEND_ROW = 22
LEGEND_COLUMN = 250

OVERLAP = "#fca5a5"
SERVER = "#7c3aed"
PARTITION = "#0891b2"
ERROR = "#9ca3af"
PASS_BG, PASS_FG = "#ecfdf5", "#166534"
FAIL_BG, FAIL_FG = "#fef2f2", "#991b1b"

PARAM_ORDER = (
    "workload",
    "backend",
    "url",
    "clients",
    "duration",
    "ttl",
    "nemeses",
    "fencing",
    "seed",
)


# ---------------------------------------------------------------- terminal and JSON


def terminal_table(result: CheckResult, history: History) -> Table:
    """The verdict, why, and the counts, for the terminal."""
    verdict = "[bold green]PASS[/]" if result.ok else "[bold red]FAIL[/]"
    workload = escape_markup(result.workload)
    table = Table(
        title=f"fencelock check: {workload} workload", title_style="bold", show_header=False
    )
    table.add_column("", no_wrap=True)
    table.add_column("", overflow="fold")
    table.add_row("verdict", verdict)
    for reason in result.reasons():
        table.add_row("", f"[red]{escape_markup(reason)}[/]")
    invariant_style = "green" if result.invariant.holds else "red"
    table.add_row("invariant", f"[{invariant_style}]{escape_markup(result.invariant.explain())}[/]")
    n = len(result.token_violations)
    table.add_row("token order", "[green]ok[/]" if not n else f"[red]{n} violations[/]")
    table.add_row(
        "overlaps",
        f"{result.overlap_count} pairs ({seconds(result.total_overlap_seconds)} in total)",
    )
    for label, value in _count_rows(result):
        table.add_row(label, str(value))
    params = ", ".join(f"{k}={_param_text(v)}" for k, v in _params(history).items())
    table.add_row("params", f"[dim]{escape_markup(params)}[/]")
    return table


def escape_markup(text: str) -> str:
    """Make ``text`` safe inside rich markup."""
    return text.replace("[", r"\[")


def to_json(result: CheckResult, history: History) -> dict[str, object]:
    """The run's parameters, the checker's result and the counts, as plain JSON values."""
    params = json.loads(json.dumps(history.params, default=str))
    return {
        "params": params,
        "ok": result.ok,
        "result": result.to_dict(),
        "counts": asdict(result.counts),
    }


def _count_rows(result: CheckResult) -> list[tuple[str, int]]:
    c = result.counts
    return [
        ("acquisitions", c.acquisitions),
        ("acquire timeouts", c.acquire_timeouts),
        ("writes accepted", c.accepted_writes),
        ("stale writes rejected", c.stale_writes),
        ("errors", c.errors),
        ("leases lost", c.leases_lost),
        ("crashes", c.crashes),
        ("faults injected", c.faults),
    ]


def _params(history: History) -> dict[str, object]:
    known = {k: history.params[k] for k in PARAM_ORDER if k in history.params}
    return known | {k: v for k, v in history.params.items() if k not in known}


def _param_text(value: object) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) or "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


# ---------------------------------------------------------------- HTML page


def write_html(result: CheckResult, history: History, path: Path) -> Path:
    """Write the self-contained HTML report to ``path`` and return it."""
    path.write_text(render_html(result, history), encoding="utf-8")
    return path


def render_html(result: CheckResult, history: History) -> str:
    """Title, parameters, verdict banner, counts, the SVG timeline and the problems found."""
    title = f"fencelock check: {result.workload}"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>
<style>
body {{ font-family: {FONT}; color: {INK}; margin: 18px auto; max-width: {WIDTH + 40}px;
       background: #fafafa; padding: 0 12px; }}
h1 {{ font-size: 22px; margin: 0 0 6px 4px; }}
.params {{ display: flex; flex-wrap: wrap; gap: 6px; margin: 0 0 12px 4px; }}
.param {{ background: #fff; border: 1px solid {GRID}; border-radius: 999px; padding: 2px 10px;
         font-size: 12.5px; color: {MUTED}; }}
.param b {{ color: {INK}; font-weight: 600; }}
.verdict {{ border-radius: 10px; padding: 10px 16px; margin: 0 0 12px; border: 1px solid; }}
.verdict.pass {{ background: {PASS_BG}; color: {PASS_FG}; border-color: #a7f3d0; }}
.verdict.fail {{ background: {FAIL_BG}; color: {FAIL_FG}; border-color: #fecaca; }}
.verdict .word {{ font-size: 22px; font-weight: 800; margin-right: 12px; letter-spacing: 0.04em; }}
.verdict ul {{ margin: 4px 0 0; padding-left: 20px; }}
.verdict li, .verdict .why {{ font-size: 14px; line-height: 1.5; }}
table.counts {{ border-collapse: collapse; background: #fff; margin: 0 0 12px;
               border: 1px solid {GRID}; border-radius: 10px; width: 100%; }}
table.counts th {{ font-size: 11.5px; font-weight: 600; color: {MUTED}; padding: 6px 8px 0;
                  text-align: center; }}
table.counts td {{ font-size: 20px; font-weight: 700; padding: 0 8px 6px; text-align: center;
                  font-variant-numeric: tabular-nums; }}
figure {{ margin: 0 0 12px; background: #fff; border: 1px solid {GRID}; border-radius: 10px;
         padding: 8px 10px; }}
svg {{ width: 100%; height: auto; display: block; }}
h2 {{ font-size: 16px; margin: 16px 4px 6px; }}
table.problems {{ border-collapse: collapse; font-size: 13px; background: #fff; }}
table.problems td, table.problems th {{ border-bottom: 1px solid {GRID}; padding: 3px 10px;
                                        text-align: left; font-variant-numeric: tabular-nums; }}
</style></head><body>
<h1>{escape(title)}</h1>
{_params_html(history)}
{_verdict_html(result)}
{_counts_html(result)}
<figure>
{render_svg(result, history)}
</figure>
{_problems_html(result, history)}
</body></html>
"""


def _params_html(history: History) -> str:
    chips = "".join(
        f'<span class="param">{escape(k)} <b>{escape(_param_text(v))}</b></span>'
        for k, v in _params(history).items()
    )
    return f'<div class="params">{chips}</div>'


def _verdict_html(result: CheckResult) -> str:
    n, stale = result.overlap_count, result.counts.stale_writes
    overlaps = (
        f"{n} overlapping lease pair{'' if n == 1 else 's'} "
        f"({seconds(result.total_overlap_seconds)} in total)"
        if n
        else "no overlapping leases"
    )
    overlaps = overlaps[0].upper() + overlaps[1:]
    if result.ok:
        if n and stale:
            harmless = (
                f", harmless: the resource rejected {stale} stale write{'' if stale == 1 else 's'}."
            )
        elif n:
            harmless = ", harmless: no write went out of token order."
        else:
            harmless = "."
        why = (
            f"Tokens were accepted in strictly increasing order; {result.invariant.explain()}. "
            f"{overlaps}{harmless}"
        )
        return (
            f'<div class="verdict pass"><span class="word">PASS</span>'
            f'<span class="why">{escape(why)}</span></div>'
        )
    items = "".join(f"<li>{escape(r)}</li>" for r in result.reasons())
    return (
        f'<div class="verdict fail"><span class="word">FAIL</span>'
        f'<span class="why">{escape(overlaps)}.</span><ul>{items}</ul></div>'
    )


def _counts_html(result: CheckResult) -> str:
    rows = [*_count_rows(result), ("overlaps", result.overlap_count)]
    head = "".join(f"<th>{escape(label)}</th>" for label, _ in rows)
    cells = "".join(f"<td>{value}</td>" for _, value in rows)
    return f'<table class="counts"><tr>{head}</tr><tr>{cells}</tr></table>'


def _problems_html(result: CheckResult, history: History, limit: int = 50) -> str:
    if result.invariant.holds and not result.token_violations:
        return ""
    t0 = _start(history)
    rows = []
    for v in result.token_violations[:limit]:
        rows.append(
            f"<tr><td>token order</td><td>{v.op.start - t0:.3f}s</td><td>client {v.op.process}"
            f"</td><td>token {v.op.token} accepted (seq {escape(v.op.value or '?')}) after "
            f"token {v.earlier.token} of client {v.earlier.process} "
            f"(seq {escape(v.earlier.value or '?')})</td></tr>"
        )
    if not result.invariant.holds and not isinstance(result.invariant, SeatsCheck):
        rows.append(
            f"<tr><td>invariant</td><td></td><td>register</td>"
            f"<td>{escape(result.invariant.explain())}</td></tr>"
        )
    seats = result.invariant if isinstance(result.invariant, SeatsCheck) else SeatsCheck(0, ())
    for sale in seats.double_sales[:limit]:
        who = ", ".join(f"client {w.process} #{w.token}" for w in sale.writes)
        rows.append(
            f"<tr><td>sold twice</td><td>{sale.writes[1].start - t0:.3f}s</td>"
            f"<td>{escape(sale.key)}</td><td>accepted {len(sale.writes)} times: "
            f"{escape(who)}</td></tr>"
        )
    rows += [
        f"<tr><td>sold twice</td><td></td><td>{escape(key)}</td><td>reported by the "
        "resource's final read; the history shows fewer than two accepted sales</td></tr>"
        for key in seats.unrecorded[:limit]
    ]
    return (
        '<h2>Problems</h2><table class="problems"><tr><th>what</th><th>at</th><th>who</th>'
        f"<th>detail</th></tr>{''.join(rows)}</table>"
    )


# ---------------------------------------------------------------- SVG timeline


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
        """The x pixel of clock reading ``t``."""
        return self.scale.x(t)


def render_svg(result: CheckResult, history: History) -> str:
    """The timeline: server lane, one row per client, axis in seconds, legend."""
    layout = _layout(history)
    height = layout.rows_bottom + AXIS + 12 + LEGEND_ROW * 4
    faults = history.of_kind("nemesis")
    server = [f for f in faults if f.process < 0 or f.process not in layout.rows]
    on_clients = [f for f in faults if f.process in layout.rows]
    parts = [_defs(), _caption(result, history), _rows(layout)]
    parts += [_server_band(f, layout) for f in server]
    parts.append(_axis(layout))
    parts += _overlap_shading(result.overlaps, layout)
    parts += [_client_fault(f, layout) for f in on_clients if _fault_kind(f) != "kill"]
    parts += [_wait(op, layout) for op in history.of_kind("acquire")]
    parts += _leases(result, layout)
    bad = {id(op) for op in result.violating_writes()}
    parts += [_write(op, layout, id(op) in bad) for op in history.of_kind("write")]
    parts += [_kill(f, layout) for f in on_clients if _fault_kind(f) == "kill"]
    parts += _labels(server, on_clients, layout)
    parts.append(_legend(layout.rows_bottom + AXIS + 14))
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height:.0f}" '
        f'width="{WIDTH}" height="{height:.0f}" font-family="{escape(FONT)}" role="img" '
        f'aria-label="timeline of the check run">\n' + "\n".join(p for p in parts if p) + "\n</svg>"
    )


def _start(history: History) -> float:
    return min((op.start for op in history.ops), default=0.0)


def _layout(history: History) -> Layout:
    start = _start(history)
    end = max((op.end for op in history.ops), default=start)
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


def _row_label(chain: Sequence[int], y: float, row: float) -> str:
    """``client 7``, with ``then 10, 11`` below when replacements took the row over."""
    if len(chain) == 1:
        return (
            f'<text class="row" x="{LEFT - 12}" y="{y + row / 2 + 4.5:.1f}" font-size="13" '
            f'fill="{INK}" text-anchor="end">client {chain[0]}</text>'
        )
    later = ", ".join(str(p) for p in chain[1:3]) + (
        f", +{len(chain) - 3}" if len(chain) > 3 else ""
    )
    return (
        f'<text class="row" x="{LEFT - 12}" y="{y + row / 2 - 1:.1f}" font-size="13" '
        f'fill="{INK}" text-anchor="end">client {chain[0]}<title>clients '
        f"{', '.join(map(str, chain))}: each replaced the one before after a kill</title></text>"
        f'\n<text x="{LEFT - 12}" y="{y + row / 2 + 10.5:.1f}" font-size="10" fill="{MUTED}" '
        f'text-anchor="end">then {later}</text>'
    )


def _defs() -> str:
    return f"""<defs>
<pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse"
 patternTransform="rotate(45)"><rect width="6" height="6" fill="{PAUSE}" fill-opacity="0.07"/>
<line x1="0" y1="0" x2="0" y2="6" stroke="{PAUSE}" stroke-width="1.8" stroke-opacity="0.65"/>
</pattern>
<pattern id="cut" width="6" height="6" patternUnits="userSpaceOnUse"
 patternTransform="rotate(-45)"><rect width="6" height="6" fill="{PARTITION}" fill-opacity="0.07"/>
<line x1="0" y1="0" x2="0" y2="6" stroke="{PARTITION}" stroke-width="1.6" stroke-opacity="0.6"/>
</pattern>
<pattern id="server" width="8" height="8" patternUnits="userSpaceOnUse"
 patternTransform="rotate(45)"><rect width="8" height="8" fill="{SERVER}" fill-opacity="0.06"/>
<line x1="0" y1="0" x2="0" y2="8" stroke="{SERVER}" stroke-width="1" stroke-opacity="0.25"/>
</pattern>
</defs>
<rect width="100%" height="100%" fill="#ffffff"/>"""


def _caption(result: CheckResult, history: History) -> str:
    p = history.params
    layout = _layout(history)
    bits = [f"{len(layout.rows)} client processes"]
    if len(layout.slots) < len(layout.rows):
        bits[0] += f" in {len(layout.slots)} rows (a killed client's replacement takes its row)"
    if "ttl" in p:
        bits.append(f"lease TTL {_param_text(p['ttl'])}s")
    if "fencing" in p:
        bits.append("fenced resource" if p["fencing"] else "no fencing")
    bits.append(f"{len(result.leases)} leases")
    bits.append("time in seconds from the start of the run")
    return (
        f'<text x="{LEFT - 100}" y="22" font-size="13" fill="{MUTED}">'
        f"{escape(' · '.join(bits))} · hover for details</text>"
    )


def _rows(layout: Layout) -> str:
    width = WIDTH - LEFT - RIGHT
    parts = [
        f'<rect x="{LEFT}" y="{TOP}" width="{width}" height="{SERVER_LANE}" fill="#faf7ff"/>'
        f'\n<text x="{LEFT - 12}" y="{TOP + SERVER_LANE / 2 + 4.5}" font-size="12.5" '
        f'fill="{SERVER}" text-anchor="end">server</text>'
    ]
    for i, chain in enumerate(layout.slots):
        y = layout.rows_top + i * layout.row
        fill = "#f8fafc" if i % 2 == 0 else "#ffffff"
        parts.append(
            f'<rect x="{LEFT}" y="{y:.1f}" width="{width}" height="{layout.row:.1f}" '
            f'fill="{fill}"/>\n{_row_label(chain, y, layout.row)}'
        )
    return "\n".join(parts)


def _axis(layout: Layout) -> str:
    step = tick_step(layout.scale.span)
    top, bottom = TOP, layout.rows_bottom
    parts = [
        f'<line x1="{LEFT}" y1="{bottom}" x2="{WIDTH - RIGHT}" y2="{bottom}" stroke="{MUTED}"/>'
    ]
    for i in range(int(layout.scale.span / step + 1e-9) + 1):
        seconds = i * step
        x = layout.x(layout.scale.start + seconds)
        parts.append(
            f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" stroke="{GRID}" '
            f'stroke-dasharray="2 3"/>\n'
            f'<line x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 5}" stroke="{MUTED}"/>'
            f'\n<text x="{x:.1f}" y="{bottom + 18}" font-size="11" fill="{MUTED}" '
            f'text-anchor="middle">{seconds:g} s</text>'
        )
    return "\n".join(parts)


def _fault_kind(fault: Op) -> str:
    """pause, kill, partition, clock or other: from the nemesis's ``detail``."""
    words = fault.detail.lower().split()
    first = words[0] if words else ""
    for kind in ("pause", "kill", "partition", "clock", "restart"):
        if first.startswith(kind):
            return kind
    return "other"


def _server_band(fault: Op, layout: Layout) -> str:
    """A lane box and a band down every client row for a server-wide fault."""
    x0 = layout.x(fault.start)
    x1 = max(layout.x(fault.end), x0 + 2.5)
    tip = f"{escape(fault.detail)}: {fault.end - fault.start:.2f}s"
    return (
        f'<g class="fault server {_fault_kind(fault)}"><title>{tip}</title>'
        f'<rect x="{x0:.1f}" y="{TOP + 4}" width="{x1 - x0:.1f}" height="{SERVER_LANE - 8}" '
        f'rx="2" fill="{SERVER}" fill-opacity="0.75"/>'
        f'<rect x="{x0:.1f}" y="{layout.rows_top}" width="{x1 - x0:.1f}" '
        f'height="{layout.rows_bottom - layout.rows_top}" fill="url(#server)" '
        f'stroke="{SERVER}" stroke-opacity="0.35" stroke-dasharray="3 3"/></g>'
    )


def _client_fault(fault: Op, layout: Layout) -> str:
    """A hatched box on the target's row: pause (red), partition (teal), other."""
    kind = _fault_kind(fault)
    fill, stroke = {"pause": ("url(#hatch)", PAUSE), "partition": ("url(#cut)", PARTITION)}.get(
        kind, ("url(#server)", SERVER)
    )
    x0, x1 = layout.x(fault.start), layout.x(fault.end)
    y = layout.y(fault.process) - layout.box / 2
    return (
        f'<rect class="fault client {kind}" x="{x0:.1f}" y="{y:.1f}" '
        f'width="{max(x1 - x0, 1.5):.1f}" '
        f'height="{layout.box}" fill="{fill}" stroke="{stroke}" stroke-width="1.1" rx="2">'
        f"<title>{escape(fault.detail)}: {fault.end - fault.start:.2f}s</title></rect>"
    )


def _kill(fault: Op, layout: Layout) -> str:
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


def _overlap_shading(overlaps: Iterable[Overlap], layout: Layout) -> list[str]:
    """The union of each row's overlap intervals, shaded behind its bars."""
    spans: dict[int, list[tuple[float, float]]] = {}
    for o in overlaps:
        for process in (o.process_a, o.process_b):
            spans.setdefault(process, []).append((o.start, o.end))
    parts = []
    for process, intervals in spans.items():
        if process not in layout.rows:
            continue
        y = layout.y(process) - layout.row / 2 + 2
        for start, end in _union(intervals):
            x0, x1 = layout.x(start), layout.x(end)
            parts.append(
                f'<rect class="overlap" x="{x0:.1f}" y="{y:.1f}" width="{max(x1 - x0, 1):.1f}" '
                f'height="{layout.row - 4:.1f}" fill="{OVERLAP}" fill-opacity="0.45"><title>client '
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


def _wait(acquire: Op, layout: Layout) -> str:
    """A thin line while the client waited; failed attempts end in a short tick."""
    if acquire.process not in layout.rows:
        return ""
    x0, x1, y = layout.x(acquire.start), layout.x(acquire.end), layout.y(acquire.process)
    if acquire.result == "ok" and x1 - x0 < 1:
        return ""
    tip = f"client {acquire.process} waited {acquire.end - acquire.start:.3f}s"
    if acquire.result == "ok":
        return (
            f'<line class="wait" x1="{x0:.1f}" y1="{y:.1f}" x2="{x1:.1f}" y2="{y:.1f}" '
            f'stroke="{WAIT}" stroke-width="2"><title>{tip}</title></line>'
        )
    return (
        f'<g class="wait {acquire.result}"><title>{tip}: {acquire.result}</title>'
        f'<line x1="{x0:.1f}" y1="{y:.1f}" x2="{x1:.1f}" y2="{y:.1f}" stroke="{WAIT}" '
        f'stroke-width="2" stroke-dasharray="3 2"/><line x1="{x1:.1f}" y1="{y - 5:.1f}" '
        f'x2="{x1:.1f}" y2="{y + 5:.1f}" stroke="{MUTED}" stroke-width="1.5"/></g>'
    )


def _leases(result: CheckResult, layout: Layout) -> list[str]:
    """Bars (solid while the lease was the newest, dashed after), lost ticks, token labels."""
    superseded: dict[tuple[int, int], float] = {}
    for o in result.overlaps:
        older = (o.process_a, o.token_a) if o.token_a < o.token_b else (o.process_b, o.token_b)
        superseded[older] = min(superseded.get(older, o.start), o.start)
    bars, labels = [], []
    for lease in result.leases:
        if lease.process not in layout.rows:
            continue
        stale_from = superseded.get((lease.process, lease.token), lease.end)
        bars.append(_lease(lease, stale_from, layout))
        labels.append(_token_label(lease, stale_from, layout))
    return bars + labels


def _lease(lease: Lease, stale_from: float, layout: Layout) -> str:
    x0, y = layout.x(lease.start), layout.y(lease.process) - BAR / 2
    x1 = max(layout.x(stale_from), x0 + 1.2)
    tip = (
        f"client {lease.process}: token {lease.token}, believed {lease.duration:.3f}s, {lease.fate}"
    )
    parts = [
        f'<rect class="lease" x="{x0:.1f}" y="{y:.1f}" width="{x1 - x0:.1f}" height="{BAR}" '
        f'rx="2" fill="{HOLD}"><title>{tip}</title></rect>'
    ]
    end = layout.x(lease.end)
    if end > x1 + 0.5:
        parts.append(
            f'<rect class="ghost" x="{x1:.1f}" y="{y + 0.75:.1f}" width="{end - x1:.1f}" '
            f'height="{BAR - 1.5}" rx="2" fill="{GHOST}" stroke="{HOLD}" stroke-width="1.3" '
            f'stroke-dasharray="4 2.5"><title>{tip}; a newer token had been issued</title></rect>'
        )
    if lease.fate == "lost":
        parts.append(
            f'<line class="lost" x1="{end:.1f}" y1="{y - 4:.1f}" x2="{end:.1f}" '
            f'y2="{y + BAR + 4:.1f}" stroke="{PAUSE}" stroke-width="2"><title>client '
            f"{lease.process} noticed token {lease.token} was lost</title></line>"
        )
    return "\n".join(parts)


def _token_label(lease: Lease, stale_from: float, layout: Layout) -> str:
    """``#token`` inside the bar where it fits (long tokens shortened to their last digits)."""
    text = f"#{lease.token}" if lease.token < 100_000 else f"#…{lease.token % 10_000:04d}"
    x0, x1 = layout.x(lease.start), layout.x(lease.end)
    if x1 - x0 < len(text) * 6.3 + 6:
        return ""
    solid = layout.x(stale_from) - x0 >= len(text) * 6.3 + 6
    fill, stroke = ("#fff", HOLD) if solid else (HOLD, GHOST)
    return (
        f'<text class="token" x="{x0 + 4:.1f}" y="{layout.y(lease.process) + 3.8:.1f}" '
        f'font-size="10.5" font-weight="700" fill="{fill}" stroke="{stroke}" '
        f'stroke-width="2.5" paint-order="stroke">{escape(text)}</text>'
    )


def _write(op: Op, layout: Layout, violating: bool) -> str:
    """Accepted: a green dot; stale: an orange cross; violating: a red cross; error: grey."""
    if op.process not in layout.rows:
        return ""
    x, y = layout.x(op.end), layout.y(op.process)
    what = {"accepted": "accepted", "stale": "rejected (stale token)"}.get(op.result, op.result)
    seq = f", seq {op.value}" if op.value is not None else ""
    tip = f"client {op.process}, token {op.token}: write {op.key} {what}{seq}"
    if violating:
        return _cross("write violation", x, y, 6.5, DOUBLE, tip + " - VIOLATION")
    if op.result == "accepted":
        return (
            f'<circle class="write accepted" cx="{x:.1f}" cy="{y:.1f}" r="2.6" fill="{SOLD}" '
            f'stroke="#fff" stroke-width="0.9"><title>{escape(tip)}</title></circle>'
        )
    if op.result == "stale":
        return _cross("write stale", x, y, 5.5, REJECTED, tip)
    return (
        f'<circle class="write error" cx="{x:.1f}" cy="{y:.1f}" r="4" fill="#fff" '
        f'stroke="{ERROR}" stroke-width="1.8"><title>{escape(tip)}</title></circle>'
    )


def _cross(cls: str, x: float, y: float, r: float, colour: str, tip: str) -> str:
    """A white ✗ in a coloured disc (the demo's bad-write marker, sized to fit a thin row)."""
    a = r * 0.45
    return (
        f'<g class="{cls}"><title>{escape(tip)}</title><circle cx="{x:.1f}" cy="{y:.1f}" '
        f'r="{r}" fill="{colour}" stroke="#fff" stroke-width="1.2"/>'
        f'<path d="M{x - a:.1f},{y - a:.1f} L{x + a:.1f},{y + a:.1f} M{x + a:.1f},{y - a:.1f} '
        f'L{x - a:.1f},{y + a:.1f}" stroke="#fff" stroke-width="1.8" stroke-linecap="round"/></g>'
    )


def _labels(server: Sequence[Op], on_clients: Sequence[Op], layout: Layout) -> list[str]:
    """Notes: ``SIGSTOP 1.2s`` over pauses, ``kill -9`` by kills, server faults in the lane."""
    row_labels = []
    for fault in on_clients:
        kind, span = _fault_kind(fault), fault.end - fault.start
        text = {"pause": f"SIGSTOP {span:.1f}s", "kill": "kill -9"}.get(kind, f"{kind} {span:.1f}s")
        colour = {"pause": PAUSE, "kill": INK, "partition": PARTITION}.get(kind, SERVER)
        row_labels.append(Label(fault.process, layout.x(fault.start) + 1, text, colour))
    parts = [
        _label_text(lb, layout.y(lb.worker) - layout.box / 2 - 2.5, 10.5)
        for lb in _inside(spread(row_labels))
    ]
    lane = [
        Label(-1, layout.x(f.start) + 3, _server_text(f), "#fff" if _wide(f, layout) else SERVER)
        for f in server
    ]
    parts += [_label_text(lb, TOP + SERVER_LANE / 2 + 4, 11) for lb in _without_collisions(lane)]
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


def _label_text(label: Label, y: float, size: float) -> str:
    halo = SERVER if label.colour == "#fff" else "#fff"
    return (
        f'<text class="label" x="{label.x:.1f}" y="{y:.1f}" font-size="{size}" '
        f'font-weight="700" fill="{label.colour}" stroke="{halo}" stroke-width="3" '
        f'paint-order="stroke">{escape(label.text)}</text>'
    )


def _legend_items() -> list[tuple[str, str]]:
    """(swatch, label) pairs; each swatch fits a 26 x 16 box around y = 0."""
    box = f'x="0" y="{-BAR / 2}" width="26" height="{BAR}" rx="2"'
    return [
        (f'<line x1="0" y1="0" x2="26" y2="0" stroke="{WAIT}" stroke-width="2"/>', "waiting"),
        (
            f'<line x1="0" y1="0" x2="24" y2="0" stroke="{WAIT}" stroke-width="2" '
            f'stroke-dasharray="3 2"/><line x1="24" y1="-5" x2="24" y2="5" stroke="{MUTED}" '
            'stroke-width="1.5"/>',
            "acquire timed out / failed",
        ),
        (f'<rect {box} fill="{HOLD}"/>', "lease believed held (#token)"),
        (
            f'<rect {box} fill="{GHOST}" stroke="{HOLD}" stroke-width="1.3" '
            'stroke-dasharray="4 2.5"/>',
            "still believed after a newer token",
        ),
        (
            f'<rect x="0" y="-9" width="26" height="18" fill="{OVERLAP}" fill-opacity="0.45"/>',
            "two clients believed at once",
        ),
        (
            f'<line x1="13" y1="-9" x2="13" y2="9" stroke="{PAUSE}" stroke-width="2"/>',
            "client noticed its lease lost",
        ),
        (f'<circle cx="13" cy="0" r="2.6" fill="{SOLD}"/>', "write accepted"),
        (
            f'<circle cx="13" cy="0" r="4" fill="#fff" stroke="{ERROR}" stroke-width="1.8"/>',
            "write failed (outcome unknown)",
        ),
        (_cross("", 13, 0, 5.5, REJECTED, "stale write rejected"), "stale write rejected"),
        (_cross("", 13, 0, 6.5, DOUBLE, "violation"), "violation (order / sold twice)"),
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


def _legend(top: float) -> str:
    parts = []
    for i, (swatch, label) in enumerate(_legend_items()):
        x, y = LEFT + (i % 4) * LEGEND_COLUMN, top + 12 + (i // 4) * LEGEND_ROW
        parts.append(
            f'<g transform="translate({x},{y})">{swatch}<text x="34" y="4.5" '
            f'font-size="12" fill="{INK}">{escape(label)}</text></g>'
        )
    return "\n".join(parts)
