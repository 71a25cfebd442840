"""``fencelock status NAME`` and ``fencelock list [PREFIX]``."""

from __future__ import annotations

import json
import sys

import click

import fencelock
from fencelock import holder as holder_module
from fencelock.backends.base import LockInfo
from fencelock.cli import errors_as_exit_codes, exitcodes, fail, readable_store, url_option
from fencelock.cli.inventory import describe_entry, group

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")


def info_dict(info: LockInfo, now: float | None = None) -> dict[str, object]:
    holder = info.holder
    held_for = holder_module.age(info.since, now) if info.held else None
    return {
        "name": info.name,
        "held": info.held,
        "owner": info.owner,
        "holder": None if holder is None else holder.to_dict(),
        "since": info.since if info.held else None,
        "held_for": None if held_for is None else round(held_for, 3),
        "token": info.token,
        "remaining": None if info.remaining is None else round(info.remaining, 3),
        "waiters": info.waiters,
    }


def who(info: LockInfo) -> str:
    """The holder as a person reads it: host:PID and command, else the owner's first hex."""
    holder, owner = info.holder, (info.owner or "")[:8]
    if holder is None:
        return owner
    return f"{holder.short()} {holder.command!r} (owner {owner})"


def describe(info: LockInfo, now: float | None = None) -> str:
    if not info.held:
        return f"{info.name}: free (last token {info.token})"
    held_for = holder_module.age(info.since, now)
    for_how_long = "" if held_for is None else f" for {held_for:.1f}s"
    waiters = "" if info.waiters is None else f", {info.waiters} waiting"
    return (
        f"{info.name}: held by {who(info)}{for_how_long} (token {info.token}), "
        f"{info.remaining or 0.0:.1f}s left{waiters}"
    )


@click.command()
@url_option
@json_option
@click.argument("name")
def status(url: str | None, as_json: bool, name: str) -> None:
    """Show who holds lock NAME, its token and remaining TTL."""
    with errors_as_exit_codes(), fencelock.connect(readable_store(url)) as client:
        info = client.inspect(name)
        parts = client.list(f"{name}.")
    primitives = [e for e in group([*parts, *([info] if info else [])]) if e.kind != "lock"]
    primitives = [e for e in primitives if e.name == name]
    if as_json:
        doc = info_dict(info) if info else {"name": name, "held": False, "token": None}
        if primitives:
            doc["primitive"] = primitives[0].to_dict()
        click.echo(json.dumps(doc))
        return
    if primitives:
        click.echo(describe_entry(primitives[0], ""))
    if info is not None or not primitives:
        click.echo(describe(info) if info else f"{name}: never locked")


@click.command(name="list")
@url_option
@json_option
@click.argument("prefix", default="")
def list_locks(url: str | None, as_json: bool, prefix: str) -> None:
    """List held locks, optionally only those whose names start with PREFIX."""
    with errors_as_exit_codes(), fencelock.connect(readable_store(url)) as client:
        infos = client.list(prefix)
    if as_json:
        click.echo(json.dumps([info_dict(i) for i in infos]))
        return
    if not infos:
        click.echo("no locks held" + (f" under {prefix!r}" if prefix else ""))
    for entry in group(infos):
        for info in entry.infos if entry.kind == "lock" else [None]:
            click.echo(describe_entry(entry, describe(info) if info else ""))


@click.command()
@url_option
@click.option("--force", is_flag=True, help="Required: end the holder's lease without its consent.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.argument("name")
def release(url: str | None, force: bool, yes: bool, name: str) -> None:
    """End the lease on NAME held by another process: fencelock release --force NAME.

    The holder finds its lease lost at its next renewal (`fencelock run` then stops its
    command); the token moves past the evicted holder's, so a guard that has seen the
    new token rejects the evicted holder's writes.
    """
    if not force:
        fail(
            "release without --force would release nothing: a lease is released by its "
            "holder; --force evicts whoever holds NAME",
            exitcodes.USAGE,
        )
    if not yes and not sys.stdin.isatty():
        fail(
            "release --force asks before evicting, and there is no terminal: add --yes",
            exitcodes.USAGE,
        )
    with errors_as_exit_codes(), fencelock.connect(readable_store(url)) as client:
        info = client.inspect(name)
        if info is None or not info.held:
            click.echo(f"{name}: not held; nothing to release")
            return
        if not yes and not _confirmed(describe(info)):
            click.echo(f"{name}: not evicted", err=True)
            sys.exit(exitcodes.DECLINED)
        evicted = client.evict(name)
        if evicted is None:
            click.echo(f"{name}: its holder let go meanwhile; nothing evicted")
            return
        bumped = client.lock(name).try_acquire()  # moves the token past the evicted one
        if bumped is not None:
            bumped.release()
        after = client.inspect(name)
    click.echo(f"{name}: evicted {who(evicted)} (token {evicted.token}); {_after(after, evicted)}")


def _after(after: LockInfo | None, evicted: LockInfo) -> str:
    """What NAME is now: a waiter took it with that token, or the next token is greater."""
    if after is not None and after.held and after.owner != evicted.owner:
        return f"now held by {who(after)} (token {after.token})"
    last = after.token if after is not None else evicted.token
    return f"the last token is now {last}; the next holder's will be greater"


def _confirmed(holder: str) -> bool:
    return click.confirm(f"{holder}\nEvict this holder?", err=True)
