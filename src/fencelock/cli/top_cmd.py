"""``fencelock top [PREFIX]``: a live view of the locks under a prefix, refreshed about
once a second with one listing per refresh (at most ``--limit`` names shown), and, with
``--metrics URL``, the processes' acquisitions and contention per second and fencing
rejections by prefix."""

from __future__ import annotations

import contextlib
import time

import click
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

import fencelock
from fencelock import clock
from fencelock.cli import errors_as_exit_codes, readable_store, url_option
from fencelock.cli.numbers import Bounds, Number
from fencelock.cli.stats_cmd import scrape
from fencelock.cli.top_view import Rates, Row, TopState, under


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}s"


def locks_table(prefix: str, rows: list[Row], shown: int, limit: int) -> Table:
    title = f"fencelock top: {len(rows)} held under {prefix or '(all)'!r}"
    if shown >= limit:
        title += f" (the first {limit} names listed)"
    table = Table(title=title, title_justify="left", expand=True)
    for header in ("name", "holder", "token", "held for", "remaining", "waiting"):
        table.add_column(header, justify="left" if header in ("name", "holder") else "right")
    for row in rows:
        held = ("" if row.since_start else "≥ ") + _seconds(row.held_for)
        table.add_row(
            row.name,
            row.holder,
            str(row.token),
            held,
            _seconds(row.remaining),
            "-" if row.waiters is None else str(row.waiters),
        )
    return table


def rates_table(rates: list[Rates]) -> Table:
    table = Table(title="by prefix (from the processes' metrics)", title_justify="left")
    for header in ("prefix", "acquired/s", "contention", "waiting", "fencing rejections"):
        table.add_column(header, justify="left" if header == "prefix" else "right")
    for rate in rates:
        share = "-" if rate.contention is None else f"{rate.contention:.0%}"
        rejections = Text(str(rate.rejections), style="bold red" if rate.rejections else "")
        table.add_row(
            rate.prefix, f"{rate.acquisitions_per_s:.1f}", share, str(rate.waiting), rejections
        )
    return table


@click.command("top")
@url_option
@click.argument("prefix", default="")
@click.option(
    "--interval",
    type=Number(Bounds(least=0.2)),
    default=1.0,
    show_default=True,
    help="Seconds between refreshes (at least 0.2).",
)
@click.option(
    "--limit",
    type=Number(Bounds(least=1, most=None, whole=True, unit="")),
    default=200,
    show_default=True,
    help="Most names shown a refresh.",
)
@click.option(
    "--metrics",
    "metrics_urls",
    multiple=True,
    metavar="URL",
    help="A process's metrics address (repeatable).",
)
@click.option("--once", is_flag=True, help="Print one refresh and exit.")
def top(
    url: str | None,
    prefix: str,
    interval: float,
    limit: int,
    metrics_urls: tuple[str, ...],
    once: bool,
) -> None:
    """A live view of the locks under PREFIX: holder, token, how long held, what is
    left, waiters; with --metrics, acquisitions and contention per second and fencing
    rejections. Ctrl-C ends it."""
    state = TopState()

    def frame(client: fencelock.Client) -> Group:
        now, wall = clock.now(), time.time()
        infos = client.list(prefix)[:limit]
        rows = state.rows(infos, now, wall)
        parts: list[Table] = [locks_table(prefix, rows, len(infos), limit)]
        if metrics_urls:
            parts.append(rates_table(state.rates(under(scrape(metrics_urls), prefix), now)))
        return Group(*parts)

    with errors_as_exit_codes():
        client = fencelock.connect(readable_store(url))
        try:
            if once:
                Console(width=max(140, Console().width)).print(frame(client))
                return
            with (
                contextlib.suppress(KeyboardInterrupt),
                Live(frame(client), auto_refresh=False, screen=False) as live,
            ):
                while True:
                    time.sleep(interval)
                    live.update(frame(client), refresh=True)
        finally:
            client.close()
