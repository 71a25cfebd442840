"""``fencelock check``: run clients against a backend under faults, and check the history."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from fencelock.check.nemesis import NEMESES, parse_nemeses
from fencelock.check.options import CheckOptions
from fencelock.check.progress import RichProgress
from fencelock.check.runner import CheckRun, run_check
from fencelock.check.workloads import WORKLOADS
from fencelock.cli import errors_as_exit_codes, exitcodes, fail
from fencelock.cli.numbers import COUNT, Bounds, Number

# Finite numbers here; the ranges are the harness's own (fencelock.check.options).
_FINITE = Number(Bounds(least=None))


class _Command(click.Command):
    """A click command whose usage errors exit 64 (EX_USAGE), like fencelock's own."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,  # click's own signature: settings passed on to click.Context
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as exc:
            raise _BadInput(exc.format_message(), exc.ctx) from None


class _BadInput(click.UsageError):
    exit_code = exitcodes.USAGE


@click.command("check", cls=_Command)
@click.option(
    "--url",
    default=None,
    metavar="URL",
    help="Backend to check (default: $FENCELOCK_URL, else a fresh SQLite file).",
)
@click.option(
    "--servers",
    default=None,
    metavar="redis|redlock|etcd|zookeeper|postgresql|advisory|mysql",
    help="Start the lock servers here: 1 redis-server, 5 for Redlock, a 3-member "
    "etcd cluster or ZooKeeper ensemble, PostgreSQL (its lease table, or advisory "
    "locks) or MariaDB.",
)
@click.option(
    "--workload",
    default="register",
    show_default=True,
    metavar="|".join(WORKLOADS),
    help=(
        "register: increment a counter; seats: sell seats, none twice; election: the "
        "leader increments the counter; semaphore: two places, never three inside; "
        "barrier: rounds of a barrier, none passed before every party arrived."
    ),
)
@click.option(
    "--clients", type=Number(COUNT), default=8, show_default=True, help="Client processes."
)
@click.option("--duration", type=_FINITE, default=10.0, show_default=True, help="Seconds to run.")
@click.option("--ttl", type=_FINITE, default=1.0, show_default=True, help="Lease TTL in seconds.")
@click.option(
    "--work",
    type=_FINITE,
    default=0.01,
    show_default=True,
    help="Mean seconds between the lease check and the write.",
)
@click.option(
    "--nemesis",
    "nemesis",
    default="pause,kill",
    show_default=True,
    metavar="LIST",
    help=f"Faults, comma-separated: {','.join(NEMESES)} (or none).",
)
@click.option("--no-fencing", is_flag=True, help="Write without checking the lease's token.")
@click.option(
    "--fence-writes-only",
    is_flag=True,
    help="Check the token on the write but not on the read (see docs/safety.md).",
)
@click.option(
    "--fence-with",
    type=click.Choice(["guard", "sqlalchemy"]),
    default="guard",
    show_default=True,
    help="What checks the resource's fence: fencelock.fencing's guard, or the SQLAlchemy "
    "integration's fence() in the resource's transactions.",
)
@click.option(
    "--seed", type=Number(COUNT), default=0, show_default=True, help="Seed of the fault schedule."
)
@click.option(
    "--report",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory for the histories, result.json and report.html.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def check(
    *,
    url: str | None,
    servers: str | None,
    workload: str,
    clients: int,
    duration: float,
    ttl: float,
    work: float,
    nemesis: str,
    no_fencing: bool,
    fence_writes_only: bool,
    fence_with: str,
    seed: int,
    report: Path | None,
    as_json: bool,
) -> None:
    """Check that the locks stay safe while processes pause, die and lose the network.

    Clients take the lock and read-modify-write an SQLite resource while the
    chosen nemeses inject faults; the merged history is then checked for
    overlapping leases, writes accepted out of token order, and lost updates
    or seats sold twice. Exits 0 when the invariants hold, 1 when they do not.
    """
    try:
        nemeses = parse_nemeses(nemesis)
    except ValueError as exc:
        fail(str(exc), exitcodes.USAGE)
    if url is None and servers is None:
        url = os.environ.get("FENCELOCK_URL") or None
    options = CheckOptions(
        url=url,
        servers=servers,
        workload=workload,
        clients=clients,
        duration=duration,
        ttl=ttl,
        work=work,
        nemeses=nemeses,
        fencing=not no_fencing,
        seed=seed,
        report=report,
        fence_reads=not fence_writes_only,
        fence_with=fence_with,
    )
    err = Console(stderr=True)
    with errors_as_exit_codes():
        try:
            with RichProgress(err) as progress:
                run = run_check(options, progress)
        except KeyboardInterrupt:
            fail("interrupted; every process the check started has been stopped", 130)
    _report(run, as_json)
    if not run.result.ok:
        fail("check failed: " + "; ".join(run.result.reasons()), 1)


def _report(run: CheckRun, as_json: bool) -> None:
    from fencelock.check.report.json_doc import to_json
    from fencelock.check.report.terminal import terminal_table

    if as_json:
        doc = to_json(run.result, run.history)
        doc["directory"] = str(run.directory) if run.kept else None
        click.echo(json.dumps(doc, indent=2, default=str))
        return
    out = Console()
    out.print(terminal_table(run.result, run.history))
    if run.kept:
        where = run.directory / "report.html"
        out.print(f"Report: [bold]{where}[/]", highlight=False, soft_wrap=True)
