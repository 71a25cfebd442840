"""``fencelock members NAME``: the live members of group NAME (``--watch``: and changes)."""

from __future__ import annotations

import json
import sys

import click

import fencelock
from fencelock.cli import errors_as_exit_codes, exitcodes, fail, readable_store, url_option
from fencelock.cli.inspect_cmds import json_option
from fencelock.cli.numbers import INTERVAL, Number
from fencelock.primitives.group import GroupChange, Member


def _member_dict(member: Member) -> dict[str, object]:
    return {
        "member": member.name,
        "data": member.data,
        "token": member.token,
        "remaining": member.remaining,
    }


def _describe(member: Member) -> str:
    data = "" if member.data is None else f" {member.data!r}"
    left = "" if member.remaining is None else f", {member.remaining:.1f}s left"
    return f"  {member.name}{data} (token {member.token}{left})"


def _change_lines(name: str, change: GroupChange) -> list[str]:
    said = [f"{name}: {len(change.members)} member(s)"]
    said += [f"  + {member}" for member in change.joined]
    said += [f"  - {member}" for member in change.left]
    return said


@click.command()
@url_option
@json_option
@click.option("--watch", is_flag=True, help="Then print each change (who joined, who left).")
@click.option(
    "--interval",
    type=Number(INTERVAL),
    metavar="SECONDS",
    default=None,
    help="With --watch: how often to look (default: a third of the TTL, at most 1 s).",
)
@click.argument("name")
def members(url: str | None, as_json: bool, watch: bool, interval: float | None, name: str) -> None:
    """Show the live members of group NAME, with their data and tokens."""
    if interval is not None and not watch:
        fail("--interval goes with --watch", exitcodes.USAGE)
    with errors_as_exit_codes(), fencelock.connect(readable_store(url)) as client:
        group = client.group(name)
        if not watch:
            found = group.members()
            if as_json:
                click.echo(json.dumps({"group": name, "members": [_member_dict(m) for m in found]}))
                return
            click.echo(f"{name}: {len(found)} member(s)")
            for member in found:
                click.echo(_describe(member))
            return
        for change in group.watch(interval):
            if as_json:
                doc = {
                    "group": name,
                    "members": [_member_dict(m) for m in change.members],
                    "joined": list(change.joined),
                    "left": list(change.left),
                }
                click.echo(json.dumps(doc))
            else:
                click.echo("\n".join(_change_lines(name, change)))
            sys.stdout.flush()
