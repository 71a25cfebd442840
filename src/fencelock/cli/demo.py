"""``fencelock demo``: a paused worker against a lock, without and with fencing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn
from rich.table import Table

from fencelock.cli import errors_as_exit_codes, exitcodes, fail
from fencelock.cli.numbers import COUNT, Bounds, Number
from fencelock.demo import DemoError, DemoResult, Options, run_demo
from fencelock.demo.model import RoundSpec

F = TypeVar("F", bound=Callable[..., Any])

_NOTE_STYLE = {
    "pause": ("⏸", "bold magenta"),
    "resume": ("▶", "magenta"),
    "double": ("✗", "bold red"),
    "rejected": ("🛡", "bold yellow"),
    "lost": ("!", "dim"),
}


class RichReporter:
    """Shows each round as a progress bar, with the pauses and their outcomes above it."""

    def __init__(self, console: Console) -> None:
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("seats"),
            console=console,
            transient=False,
        )
        self._task: TaskID | None = None

    def __enter__(self) -> RichReporter:
        self._progress.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._progress.stop()

    def round_started(self, spec: RoundSpec, seats: int) -> None:
        """A new bar for the round."""
        self._task = self._progress.add_task(f"Round {spec.number}: {spec.title:<16}", total=seats)

    def progress(self, sold: int) -> None:
        """Seats sold so far in the current round."""
        if self._task is not None:
            self._progress.update(self._task, completed=sold)

    def note(self, text: str, kind: str) -> None:
        """One line of the story (a pause, a double sale, a rejected write)."""
        icon, style = _NOTE_STYLE.get(kind, ("·", ""))
        self._progress.console.print(f"  {icon} {text}", style=style, highlight=False)


def results_table(result: DemoResult) -> Table:
    """Per round: seats sold, seats sold twice, stale writes rejected, pauses, leases lost."""
    table = Table(
        title="fencelock demo: a paused worker vs. the lock on show/42", title_style="bold"
    )
    table.add_column("round", no_wrap=True)
    for heading in (
        "seats\nsold",
        "sold\ntwice",
        "stale writes\nrejected",
        "pauses\ninjected",
        "leases\nlost",
        "time",
    ):
        table.add_column(heading, justify="right", no_wrap=True)
    for r in result.rounds:
        twice = f"[bold {'red' if r.sold_twice else 'green'}]{r.sold_twice}[/]"
        table.add_row(
            f"{r.number} {r.title}",
            f"{r.seats_sold}/{r.seats}",
            twice,
            str(r.stale_rejected),
            str(r.pauses),
            str(r.leases_lost),
            f"{r.seconds:.1f}s",
        )
    return table


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _verdict(result: DemoResult) -> str:
    """Two sentences on what the rounds showed (only said when the demo went to plan)."""
    unfenced, fenced = result.rounds
    return (
        f"Locks only: {_count(unfenced.pauses, 'frozen worker')} woke up after the lease "
        f"expired and sold {_count(unfenced.sold_twice, 'seat')} a second time; each had "
        "checked its lease just before the pause.\n"
        f"Locks + fencing: the shop rejected {_count(fenced.stale_rejected, 'stale write')} "
        "in the sale's own transaction; no seat was sold twice."
    )


def _knob(
    name: str,
    kind: click.ParamType | type[int],  # type: ignore[type-arg]  # generic from click 8.4 on
    help: str,
) -> Callable[[F], F]:
    """``--name``, its default the one :class:`Options` gives that field."""
    default = getattr(_DEFAULTS, name)
    return click.option(f"--{name}", type=kind, default=default, show_default=True, help=help)


_DEFAULTS = Options()


@click.command("demo")
@_knob("workers", Number(Bounds(least=2, most=64, whole=True, unit="")), "Seller processes.")
@_knob("seats", Number(Bounds(least=1, most=100_000, whole=True, unit="")), "Seats of the show.")
@_knob("ttl", Number(Bounds(least=0.05, most=5.0)), "Lease TTL in seconds.")
@_knob(
    "pauses", Number(Bounds(most=1000, whole=True, unit="")), "SIGSTOP pauses injected per round."
)
@_knob("seed", Number(COUNT), "Seed for where the pauses fall.")
@_knob(
    "out",
    click.Path(file_okay=False, path_type=Path),
    "Directory for the databases and timeline.html.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
def demo(
    *, workers: int, seats: int, ttl: float, pauses: int, seed: int, out: Path, as_json: bool
) -> None:
    """Sell seats with paused workers: locks alone sell seats twice; fencing does not.

    Runs two rounds on the embedded SQLite backend, prints a table and writes an
    HTML timeline. Exits 0 when round 1 shows the hazard and round 2 has no seat
    sold twice.
    """
    options = Options(workers=workers, seats=seats, ttl=ttl, pauses=pauses, seed=seed, out=out)
    err = Console(stderr=True)
    with errors_as_exit_codes():
        try:
            with RichReporter(err) as reporter:
                result = run_demo(options, reporter)
        except DemoError as exc:
            fail(str(exc), exitcodes.INTERNAL)
    _report(result, as_json)
    problems = result.problems()
    if problems:
        code = exitcodes.INTERNAL if result.rounds[1].sold_twice else 1
        fail("demo failed: " + "; ".join(problems), code)


def _report(result: DemoResult, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(result.as_dict(), indent=2))
        return
    out = Console()
    out.print()
    out.print(results_table(result))
    if not result.problems():
        out.print(_verdict(result), highlight=False)
    out.print(
        f"\nTimeline: [bold]{result.html}[/]  (open it in a browser)",
        highlight=False,
        soft_wrap=True,  # keep the path on one line, to copy it
    )
