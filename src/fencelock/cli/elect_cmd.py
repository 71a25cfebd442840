"""``fencelock elect NAME -- CMD``: run CMD only while leader; ``elect --observe NAME``."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Sequence

import click

import fencelock
from fencelock import holder
from fencelock.cli import errors_as_exit_codes, exitcodes, fail, url_option
from fencelock.cli.numbers import INTERVAL, Number, ttl_option
from fencelock.cli.run_cmd import (
    RunCommand,
    default_grace,
    exit_status,
    grace_option,
    release_quietly,
    run_supervised,
    signal_name,
)
from fencelock.cli.run_signals import Interrupted, SignalRelay
from fencelock.client import Client
from fencelock.errors import FencelockError, LockTimeout
from fencelock.primitives.election import Election, Leader, Leadership


def _campaign(election: Election, value: str | None, relay: SignalRelay) -> Leadership:
    """Wait to lead. A signal meanwhile exits 128+N with nothing left held."""
    relay.wait_again()
    leadership: Leadership | None = None
    try:
        with errors_as_exit_codes():
            try:
                leadership = election.campaign(value, timeout=0)
            except LockTimeout:
                click.echo(f"fencelock: {_waiting(election)}", err=True)
                leadership = election.campaign(value)
        relay.hold()
    except Interrupted as stop:
        if leadership is not None:
            release_quietly(leadership.lease)
        fail(
            f"interrupted by {signal_name(stop.signum)} while campaigning for {election.name!r}",
            exitcodes.SIGNALLED + stop.signum,
        )
    return leadership


def _waiting(election: Election) -> str:
    """What a candidate says as it starts to wait: who leads, if anyone can tell."""
    with contextlib.suppress(FencelockError):
        leader = election.leader()
        if leader is not None:
            value = "" if leader.value is None else f" {leader.value!r}"
            return f"waiting to lead {election.name!r}: term {leader.term}{value} leads"
    return f"waiting to lead {election.name!r}"


def lead(
    client: Client, name: str, value: str | None, ttl: float, command: Sequence[str], grace: float
) -> int:
    """Campaign, run CMD while leader, campaign again after a loss; CMD's exit status
    once CMD exits of itself (or by a signal sent to ``fencelock elect``)."""
    with errors_as_exit_codes():
        election = client.election(name, ttl=ttl)  # the name and TTL checked
    relay = SignalRelay()
    relay.install()
    while True:
        leadership = _campaign(election, value, relay)
        click.echo(f"fencelock: leading {name!r} (term {leadership.term})", err=True)
        stopped = run_supervised(leadership.lease, command, grace, relay)
        if stopped.for_lease is None and not leadership.lost:
            with errors_as_exit_codes():
                leadership.resign()
            return exit_status(stopped.returncode)
        why = stopped.for_lease or f"lost ({leadership.lease.lost_reason})"
        why = why.replace(" while the command ran", "")
        click.echo(
            f"fencelock: leadership of {name!r} (term {leadership.term}) {why}; "
            "the command was stopped",
            err=True,
        )
        with contextlib.suppress(FencelockError):
            leadership.resign()  # the lease is lost; its announcement goes too
        if relay.stopping:
            return exitcodes.LEASE_LOST
        click.echo(f"fencelock: campaigning again for {name!r}", err=True)


def _leader_dict(name: str, leader: Leader | None) -> dict[str, object]:
    if leader is None:
        return {"name": name, "leader": None}
    return {"name": name, "term": leader.term, "value": leader.value, "owner": leader.owner}


def _describe(name: str, leader: Leader | None) -> str:
    if leader is None:
        return f"{name}: no leader"
    value = "" if leader.value is None else f" {leader.value!r}"
    return f"{name}: leader{value}, term {leader.term}, owner {(leader.owner or '')[:8]}"


def observe(client: Client, name: str, as_json: bool, interval: float | None) -> None:
    """Print the leader, then each change, until interrupted."""
    with errors_as_exit_codes():
        for leader in client.election(name).observe(interval):
            line = json.dumps(_leader_dict(name, leader)) if as_json else _describe(name, leader)
            click.echo(line)
            sys.stdout.flush()


@click.command(cls=RunCommand)
@url_option
@ttl_option(10.0, "Leadership lease TTL in seconds: a dead leader is replaced within about this.")
@click.option("--value", default=None, help="This candidate's value, shown to observers.")
@grace_option
@click.option("--observe", is_flag=True, help="Print the leader and each change; run nothing.")
@click.option("--json", "as_json", is_flag=True, help="With --observe: one JSON object a line.")
@click.option(
    "--interval",
    type=Number(INTERVAL),
    default=None,
    metavar="SECONDS",
    help="With --observe: how often to look (default: a third of the TTL, at most 1 s).",
)
@click.argument("name")
@click.argument("command", nargs=-1)
def elect(
    url: str | None,
    ttl: float,
    value: str | None,
    grace: float | None,
    observe: bool,
    as_json: bool,
    interval: float | None,
    name: str,
    command: tuple[str, ...],
) -> None:
    """Run COMMAND only while leader of NAME: fencelock elect [OPTIONS] NAME -- COMMAND...

    COMMAND gets FENCELOCK_TOKEN (the term, a fencing token) and FENCELOCK_NAME. If the
    leadership is lost, COMMAND is stopped and fencelock campaigns again; when COMMAND
    exits of itself, fencelock resigns and exits with its status.
    `fencelock elect --observe NAME` prints the leader and each change instead.
    """
    if observe and command:
        fail("--observe runs no command", exitcodes.USAGE)
    if not observe and not command:
        fail("a command to run while leader is missing: elect NAME -- CMD", exitcodes.USAGE)
    stop_grace = default_grace(grace, ttl)
    holder.set_program(command)  # the lock store shows CMD's program, never its arguments
    with errors_as_exit_codes():
        client = fencelock.connect(url)
    try:
        if observe:
            observe_leader(client, name, as_json, interval)
            return
        code = lead(client, name, value, ttl, command, stop_grace)
    finally:
        client.close()
    sys.exit(code)


def observe_leader(client: Client, name: str, as_json: bool, interval: float | None) -> None:
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how an observation ends
        observe(client, name, as_json, interval)
