"""The ``fencelock`` command."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NoReturn, TypeVar

import click

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


url_option = click.option(
    "--url",
    envvar="FENCELOCK_URL",
    default=None,
    metavar="URL",
    help="Backend URL (default: $FENCELOCK_URL, else an SQLite file in the state directory).",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="fencelock")
def cli() -> None:
    """Distributed locks with fencing tokens."""


def main() -> None:
    """Entry point of the ``fencelock`` command."""
    from fencelock.cli import check_cmd, demo, init_cmd, inspect_cmds, run_cmd

    for module in (run_cmd, inspect_cmds, init_cmd, demo, check_cmd):
        module.register(cli)
    # The CLI reports losses itself, one line each; keep the library's log quiet.
    logging.getLogger("fencelock").addHandler(logging.NullHandler())
    logging.getLogger("fencelock").propagate = False
    cli(prog_name="fencelock")
