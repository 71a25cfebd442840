"""Tables: number formats, rich tables built from columns, their Markdown copy, targets."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

# a column: its header, and the cell it shows for a row
Column = tuple[str, Callable[[Any], str]]


def fmt_ms(value: float | int | None) -> str:
    if value is None or math.isnan(value):
        return "-"
    return f"{value:.3f}" if value < 10 else f"{value:,.1f}"


def fmt_number(value: float, spec: str) -> str:
    return "-" if math.isnan(value) else spec.format(value)


def fmt_rate(value: float) -> str:
    return fmt_number(value, "{:,.0f}")


def fmt_ratio(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.2f}x"


def fmt_rounds(rates: Iterable[float]) -> str:
    """Each round's rate, as the tables show them."""
    return " ".join(f"{x:,.0f}" for x in rates)


def new_table(title: str, columns: Sequence[str], left: int = 1) -> Table:
    """A table whose first ``left`` columns are text and the rest right-aligned numbers."""
    table = Table(title=title, title_justify="left")
    for i, column in enumerate(columns):
        table.add_column(column, justify="left" if i < left else "right", no_wrap=i < left)
    return table


def rows_table(title: str, rows: Iterable[Any], columns: Sequence[Column], left: int = 1) -> Table:
    """A table of ``rows``, one cell per column."""
    table = new_table(title, [header for header, _ in columns], left)
    for row in rows:
        table.add_row(*(cell(row) for _, cell in columns))
    return table


def table_markdown(table: Table) -> str:
    """A rich table as a Markdown table (title in bold above it), for docs and notes."""

    def plain(cell: object) -> str:
        text = cell.plain if isinstance(cell, Text) else Text.from_markup(str(cell)).plain
        return text.replace("|", "\\|").replace("\n", " ")

    headers = [plain(column.header) for column in table.columns]
    align = ["---:" if column.justify == "right" else "---" for column in table.columns]
    rows = zip(*(list(column.cells) for column in table.columns), strict=True)
    lines = [f"**{plain(table.title or '')}**", "", "| " + " | ".join(headers) + " |"]
    lines.append("|" + "|".join(align) + "|")
    lines += ["| " + " | ".join(plain(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def console(width: int = 200) -> Console:
    """A console as wide as the terminal, or ``width`` when the output is a file."""
    return Console(width=None if sys.stdout.isatty() else width)


def print_errors(out: Console, failures: Iterable[tuple[str, int, str | None]]) -> None:
    """One red line per (label, errors, first error) that has a first error."""
    for label, errors, first_error in failures:
        if first_error:
            last_line = first_error.strip().splitlines()[-1]
            out.print(f"[red]{label}: {errors} errors; first: {last_line}[/red]")


# --------------------------------------------------------------------------- contended columns


def _sections(row: Any) -> str:
    return " ".join(str(n) for n in row.per_worker)


def _tokens(row: Any) -> str:
    return str(row.token_inversions) if row.key.startswith("fencelock") else "n/a"


LOCK: Column = ("lock", lambda c: c.label)
WAKES: Column = ("waiter wakes by", lambda c: c.wait)
SECTIONS_PER_SECOND: Column = ("CS/s", lambda c: f"{c.sections_per_second:,.0f}")
HANDOFFS: list[Column] = [
    ("handoff p50", lambda c: fmt_ms(c.handoff_ms["p50"])),
    ("p99", lambda c: fmt_ms(c.handoff_ms["p99"])),
    ("max", lambda c: fmt_ms(c.handoff_ms["max"])),
    ("to other worker p50", lambda c: fmt_ms(c.cross_handoff_ms["p50"])),
    ("p99", lambda c: fmt_ms(c.cross_handoff_ms["p99"])),
    ("max", lambda c: fmt_ms(c.cross_handoff_ms["max"])),
]
HANDOFF_COUNT: Column = (
    "handoffs (to other)",
    lambda c: f"{c.handoff_ms['n']:,} ({c.cross_handoff_ms['n']:,})",
)
FAIRNESS: list[Column] = [
    ("sections per worker", _sections),
    ("Jain", lambda c: fmt_number(c.jain_index, "{:.2f}")),
    ("spread", lambda c: fmt_number(c.spread, "±{:.0%}")),
]
SELF_REACQUIRE: Column = ("self re-acq", lambda c: fmt_number(c.self_reacquire_fraction, "{:.0%}"))


def waits(worst: str) -> list[Column]:
    """The acquire wait's p99 and maximum, the latter headed ``worst``."""
    return [
        ("wait p99", lambda c: fmt_ms(c.acquire_wait_ms["p99"])),
        (worst, lambda c: fmt_ms(c.acquire_wait_ms["max"])),
    ]


SAFETY: list[Column] = [
    ("overlaps", lambda c: str(c.overlaps)),
    ("token inv.", _tokens),
    ("errors", lambda c: str(c.errors)),
]
TOKENS_AND_ERRORS: list[Column] = SAFETY[1:]


# --------------------------------------------------------------------------- targets


@dataclass
class Target:
    scenario: str
    what: str
    goal: str
    measured: str
    met: bool | None  # None: not measured (a row missing, or pending)


def at_least(scenario: str, what: str, value: float | None, goal: float, unit: str) -> Target:
    if value is None or math.isnan(value):
        return Target(scenario, what, f">= {goal:g}{unit}", "n/a", None)
    return Target(scenario, what, f">= {goal:g}{unit}", f"{value:.2f}{unit}", value >= goal)


def at_most(scenario: str, what: str, value: float | None, goal: float, unit: str) -> Target:
    if value is None or math.isnan(value):
        return Target(scenario, what, f"<= {goal:g}{unit}", "n/a", None)
    return Target(scenario, what, f"<= {goal:g}{unit}", f"{value:.3f}{unit}", value <= goal)


def targets_table(found: Iterable[Target], title: str = "Targets") -> Table:
    table = new_table(title, ("#", "target", "goal", "measured", "met"), left=2)
    for t in found:
        met = "n/a" if t.met is None else ("[green]yes[/green]" if t.met else "[red]no[/red]")
        table.add_row(t.scenario, t.what, t.goal, t.measured, met)
    return table
