"""The table ``fencelock check`` prints: the verdict, why, and the counts."""

from __future__ import annotations

from rich.table import Table

from fencelock.check.checker import CheckResult, seconds
from fencelock.check.history import History
from fencelock.check.report.summary import count_rows, ordered_params, param_text


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
        f"{result.overlap_count} pairs ({seconds(result.total_overlap_seconds)} in total, "
        f"the longest {seconds(result.longest_overlap_seconds)})",
    )
    for label, value in count_rows(result):
        table.add_row(label, str(value))
    params = ", ".join(f"{k}={param_text(v)}" for k, v in ordered_params(history).items())
    table.add_row("params", f"[dim]{escape_markup(params)}[/]")
    return table


def escape_markup(text: str) -> str:
    """Make ``text`` safe inside rich markup."""
    return text.replace("[", r"\[")
