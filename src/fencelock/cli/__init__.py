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


_UNITS = (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0))  # "ms" before "s"


class Duration(click.ParamType):  # type: ignore[type-arg]
    """Seconds, written ``30``, ``30s``, ``250ms``, ``5m`` or ``1h``."""

    name = "duration"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, (int, float)):
            return float(value)
        text = str(value).strip()
        for unit, unit_scale in _UNITS:
            if text.endswith(unit):
                number, scale = text[: -len(unit)], unit_scale
                break
        else:
            number, scale = text, 1.0
        try:
            seconds = float(number) * scale
        except ValueError:
            self.fail(f"{text!r} is not a duration (30, 30s, 250ms, 5m, 1h)", param, ctx)
        if not seconds >= 0:
            self.fail(f"{text!r} is negative", param, ctx)
        return seconds


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
    from fencelock.cli import (
        check_cmd,
        demo,
        elect_cmd,
        init_cmd,
        inspect_cmds,
        run_cmd,
        stats_cmd,
        top_cmd,
    )

    commands = (run_cmd, elect_cmd, inspect_cmds, init_cmd, demo, check_cmd, stats_cmd, top_cmd)
    for module in commands:
        module.register(cli)
    # The CLI reports losses itself, one line each; keep the library's log quiet.
    logging.getLogger("fencelock").addHandler(logging.NullHandler())
    logging.getLogger("fencelock").propagate = False
    cli(prog_name="fencelock")
