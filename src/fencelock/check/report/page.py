"""``report.html``: a self-contained page (no scripts, no external assets).

The run's parameters, a PASS/FAIL banner saying why, the counts, the SVG timeline
(:mod:`fencelock.check.report.timeline`), a table of the problems found and links to
the run's files beside the page (``result.json``, the histories).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from html import escape
from pathlib import Path

from fencelock.check.checker import CheckResult, SeatsCheck, seconds
from fencelock.check.history import History
from fencelock.check.report.summary import count_rows, ordered_params, param_text, run_start
from fencelock.check.report.timeline import render_svg
from fencelock.toolkit.page import page
from fencelock.toolkit.palette import (
    FAIL_BG,
    FAIL_FG,
    FAIL_LINE,
    FONT,
    GRID,
    INK,
    MUTED,
    PAGE,
    PAPER,
    PASS_BG,
    PASS_FG,
    PASS_LINE,
)
from fencelock.toolkit.scale import WIDTH

STYLE = f"""body {{ font-family: {FONT}; color: {INK}; margin: 18px auto; max-width: {WIDTH + 40}px;
       background: {PAGE}; padding: 0 12px; }}
h1 {{ font-size: 22px; margin: 0 0 6px 4px; }}
.params {{ display: flex; flex-wrap: wrap; gap: 6px; margin: 0 0 12px 4px; }}
.param {{ background: {PAPER}; border: 1px solid {GRID}; border-radius: 999px; padding: 2px 10px;
         font-size: 12.5px; color: {MUTED}; }}
.param b {{ color: {INK}; font-weight: 600; }}
.verdict {{ border-radius: 10px; padding: 10px 16px; margin: 0 0 12px; border: 1px solid; }}
.verdict.pass {{ background: {PASS_BG}; color: {PASS_FG}; border-color: {PASS_LINE}; }}
.verdict.fail {{ background: {FAIL_BG}; color: {FAIL_FG}; border-color: {FAIL_LINE}; }}
.verdict .word {{ font-size: 22px; font-weight: 800; margin-right: 12px; letter-spacing: 0.04em; }}
.verdict ul {{ margin: 4px 0 0; padding-left: 20px; }}
.verdict li, .verdict .why {{ font-size: 14px; line-height: 1.5; }}
table.counts {{ border-collapse: collapse; background: {PAPER}; margin: 0 0 12px;
               border: 1px solid {GRID}; border-radius: 10px; width: 100%; }}
table.counts th {{ font-size: 11.5px; font-weight: 600; color: {MUTED}; padding: 6px 8px 0;
                  text-align: center; }}
table.counts td {{ font-size: 20px; font-weight: 700; padding: 0 8px 6px; text-align: center;
                  font-variant-numeric: tabular-nums; }}
figure {{ margin: 0 0 12px; background: {PAPER}; border: 1px solid {GRID}; border-radius: 10px;
         padding: 8px 10px; }}
svg {{ width: 100%; height: auto; display: block; }}
h2 {{ font-size: 16px; margin: 16px 4px 6px; }}
table.problems {{ border-collapse: collapse; font-size: 13px; background: {PAPER}; }}
table.problems td, table.problems th {{ border-bottom: 1px solid {GRID}; padding: 3px 10px;
                                        text-align: left; font-variant-numeric: tabular-nums; }}
.files {{ display: flex; flex-wrap: wrap; gap: 4px 14px; margin: 0 4px 12px; font-size: 13px; }}
.files a {{ color: {INK}; }}
"""
# The files the runner writes beside report.html (runner.py, conductor.py), as linked.
RUN_FILES = ("result.json", "params.json", "history-*.jsonl", "client-*.log")


def write_html(result: CheckResult, history: History, path: Path) -> Path:
    """Write the self-contained HTML report to ``path``, linking the run's files beside it."""
    path.write_text(render_html(result, history, run_files(path.parent)), encoding="utf-8")
    return path


def run_files(directory: Path) -> list[str]:
    """The names of the run's files in ``directory``: ``RUN_FILES``' order, numbers in order."""
    names = []
    for pattern in RUN_FILES:
        found = {p.name for p in directory.glob(pattern) if p.is_file()}
        names += sorted(found, key=_numbered)
    return names


def _numbered(name: str) -> list[tuple[int, int, str]]:
    """``history-9.jsonl`` before ``history-10.jsonl``."""
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", name)]


def render_html(result: CheckResult, history: History, files: Sequence[str] = ()) -> str:
    """Title, parameters, verdict banner, counts, the SVG timeline, the problems found and
    links to ``files`` (names of the run's files beside the page)."""
    title = f"fencelock check: {result.workload}"
    body = f"""<h1>{escape(title)}</h1>
{_params_html(history)}
{_verdict_html(result)}
{_counts_html(result)}
<figure>
{render_svg(result, history)}
</figure>
{_problems_html(result, history)}
{_files_html(files)}
"""
    return page(title, STYLE, body)


def _files_html(files: Sequence[str]) -> str:
    if not files:
        return ""
    links = "".join(f'<a href="{escape(name)}">{escape(name)}</a>' for name in files)
    return f'<h2>Files of this run</h2><nav class="files">{links}</nav>'


def _params_html(history: History) -> str:
    chips = "".join(
        f'<span class="param">{escape(k)} <b>{escape(param_text(v))}</b></span>'
        for k, v in ordered_params(history).items()
    )
    return f'<div class="params">{chips}</div>'


def _verdict_html(result: CheckResult) -> str:
    n, stale = result.overlap_count, result.counts.stale_writes
    overlaps = (
        f"{n} overlapping lease pair{'' if n == 1 else 's'} "
        f"({seconds(result.total_overlap_seconds)} in total, "
        f"the longest {seconds(result.longest_overlap_seconds)})"
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
    rows = [*count_rows(result), ("overlaps", result.overlap_count)]
    head = "".join(f"<th>{escape(label)}</th>" for label, _ in rows)
    cells = "".join(f"<td>{value}</td>" for _, value in rows)
    return f'<table class="counts"><tr>{head}</tr><tr>{cells}</tr></table>'


def _problems_html(result: CheckResult, history: History, limit: int = 50) -> str:
    if result.invariant.holds and not result.token_violations:
        return ""
    t0 = run_start(history)
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
