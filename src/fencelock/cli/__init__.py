"""The ``fencelock`` command."""

from __future__ import annotations

import difflib
import importlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NoReturn, TypeVar

import click

import fencelock
from fencelock.cli import exitcodes
from fencelock.errors import (
    BackendUnavailable,
    ConfigError,
    FencelockError,
    LeaseLost,
    LockTimeout,
)

F = TypeVar("F", bound=Callable[..., object])

_EXIT_FOR: list[tuple[type[FencelockError], int]] = [
    (ConfigError, exitcodes.USAGE),
    (BackendUnavailable, exitcodes.UNAVAILABLE),
    (LockTimeout, exitcodes.NOT_ACQUIRED),
    (LeaseLost, exitcodes.LEASE_LOST),
]


def fail(message: str, code: int) -> NoReturn:
    """One line on stderr, no traceback, and a documented exit code."""
    click.echo(f"fencelock: {message}", err=True)
    sys.exit(code)


@contextmanager
def errors_as_exit_codes() -> Iterator[None]:
    try:
        yield
    except FencelockError as exc:
        code = next((c for t, c in _EXIT_FOR if isinstance(exc, t)), exitcodes.INTERNAL)
        fail(str(exc), code)


def readable_store(url: str | None) -> str:
    """``url`` (default: :func:`fencelock.connect`'s) for a command that only looks: an
    SQLite file that does not exist is no lock store (:class:`BackendUnavailable`, exit
    69), never one made, directories and all, by looking at it."""
    from fencelock.backends import sqlite_file
    from fencelock.client import default_url

    resolved = default_url() if url is None else url
    path = sqlite_file(resolved)
    if path is not None and not os.path.exists(path):
        raise BackendUnavailable(
            f"no lock store at {path}: nothing was ever locked there (is --url right?)"
        )
    return resolved


url_option = click.option(
    "--url",
    envvar="FENCELOCK_URL",
    default=None,
    metavar="URL",
    help="Backend URL (default: $FENCELOCK_URL, else an SQLite file in the state directory).",
)


# name -> (module of fencelock.cli, the command in it, the line `fencelock --help` shows).
# A command's module (and what it needs: rich, the check harness) loads only when it runs.
_COMMANDS = {
    "check": ("check_cmd", "check", "Attack a lock setup: pauses, kills, restarts; a verdict."),
    "demo": ("demo", "demo", "Sell seats with paused workers: locks alone vs locks and fencing."),
    "elect": ("elect_cmd", "elect", "Run COMMAND only while leader of NAME (or --observe)."),
    "init": ("init_cmd", "init", "Create the backend's tables, or print their SQL (--sql)."),
    "list": ("inspect_cmds", "list_locks", "List held locks whose names start with PREFIX."),
    "members": ("members_cmd", "members", "The live members of group NAME (or --watch them)."),
    "release": ("inspect_cmds", "release", "End the lease on NAME held by another process."),
    "run": ("run_cmd", "run", "Hold lock NAME while COMMAND runs."),
    "stats": ("stats_cmd", "stats", "The five metrics of processes serving them."),
    "status": ("inspect_cmds", "status", "Who holds lock NAME, its token and remaining TTL."),
    "top": ("top_cmd", "top", "A live view of the locks under PREFIX."),
}


class _Commands(click.Group):
    """The commands of :data:`_COMMANDS`, each imported when it is asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = _COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module, attribute, summary = entry
        command: click.Command = getattr(
            importlib.import_module(f"fencelock.cli.{module}"), attribute
        )
        command.short_help = summary
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, summary) for name, (_, _, summary) in sorted(_COMMANDS.items())]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(fencelock.__version__, prog_name="fencelock")
@click.option(
    "-v", "--verbose", is_flag=True, help="Show the drivers' own log lines (kazoo, asyncio...)."
)
def cli(verbose: bool) -> None:
    """Distributed locks with fencing tokens."""
    quiet_logs(verbose)


def quiet_logs(verbose: bool) -> None:
    """The CLI reports what matters itself, one line each: the library's log and the
    drivers' (kazoo's connection states, asyncio's) stay quiet unless ``--verbose``."""
    logging.getLogger("fencelock").addHandler(logging.NullHandler())
    logging.getLogger("fencelock").propagate = False
    if verbose:
        logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    else:  # a handler on the root logger keeps logging's last resort (stderr) unused
        logging.getLogger().addHandler(logging.NullHandler())


def usage_line(exc: click.UsageError) -> str:
    """A usage error as one line: what is wrong, a guess at a mistyped command, and where
    the help is (click's own banner is three lines more)."""
    message = exc.format_message().rstrip(".")
    path = exc.ctx.command_path if exc.ctx is not None else "fencelock"
    typed = message.removeprefix("No such command '").removesuffix("'")
    if typed != message:
        close = difflib.get_close_matches(typed, sorted(_COMMANDS), n=2)
        if close:
            message += "; did you mean " + " or ".join(f"'{c}'" for c in close) + "?"
    return f"{message} (see '{path} --help')"


def main() -> None:
    """Entry point of the ``fencelock`` command: every usage error exits 64 (EX_USAGE),
    the parser's own included."""
    try:
        code = cli.main(prog_name="fencelock", standalone_mode=False)
    except click.UsageError as exc:
        fail(usage_line(exc), exitcodes.USAGE)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.Abort:  # Ctrl-C at a prompt, or standard input closed under one
        click.echo("", err=True)
        sys.exit(exitcodes.SIGNALLED + signal.SIGINT)
    sys.exit(code if isinstance(code, int) else exitcodes.OK)
