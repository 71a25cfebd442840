"""Every number a user gives the command is checked in one place
(:func:`fencelock.cli.numbers.checked`): NaN, an infinity or a value out of range is one
line naming the option, exit 64, before anything runs. A NaN ``--grace`` once passed
``grace > limit`` (false for NaN) and crashed the supervisor with CMD running."""

from __future__ import annotations

import importlib

import click
import pytest

from fencelock.cli import _COMMANDS
from fencelock.cli.numbers import Number

from .conftest import fencelock_cmd

# Every numeric option of every command: test_the_table_lists_every_numeric_option keeps
# it whole, so a new option gets the cases below.
NUMERIC_OPTIONS = [
    ("run", "--ttl"),
    ("run", "--wait"),
    ("run", "--grace"),
    ("run", "--max-hold"),
    ("run", "--at-least"),
    ("elect", "--ttl"),
    ("elect", "--grace"),
    ("elect", "--interval"),
    ("members", "--interval"),
    ("top", "--interval"),
    ("top", "--limit"),
    ("check", "--clients"),
    ("check", "--duration"),
    ("check", "--ttl"),
    ("check", "--work"),
    ("check", "--seed"),
    ("demo", "--workers"),
    ("demo", "--seats"),
    ("demo", "--ttl"),
    ("demo", "--pauses"),
    ("demo", "--seed"),
]
NEGATIVE_ALLOWED = {("check", "--seed"), ("demo", "--seed")}
NOT_NUMBERS = ["nan", "NaN", "inf", "-inf", "1e999"]


def _command(name: str) -> click.Command:
    module, attribute, _ = _COMMANDS[name]
    command: click.Command = getattr(importlib.import_module(f"fencelock.cli.{module}"), attribute)
    return command


def _looks_numeric(param: click.Parameter) -> bool:
    kind = param.type
    return isinstance(kind, (Number, click.types.IntParamType, click.types.FloatParamType))


def test_the_table_lists_every_numeric_option_and_each_goes_through_the_validator() -> None:
    found = {
        (name, max(param.opts, key=len))
        for name in _COMMANDS
        for param in _command(name).params
        if isinstance(param, click.Option) and _looks_numeric(param)
    }
    assert found == set(NUMERIC_OPTIONS)
    for name, option in NUMERIC_OPTIONS:
        param = next(p for p in _command(name).params if option in p.opts)
        assert isinstance(param.type, Number), (name, option, param.type)


def _args(command: str, option: str, value: str) -> list[str]:
    if command == "run":
        return ["run", option, value, "jobs/n", "--", "true"]
    if command == "elect" and option == "--interval":
        return ["elect", "--observe", option, value, "jobs/e"]
    if command == "elect":
        return ["elect", option, value, "jobs/e", "--", "true"]
    if command == "members":
        return ["members", "--watch", option, value, "workers"]
    if command == "top":
        return ["top", "--once", option, value]
    return [command, option, value]


CASES = [
    (command, option, value)
    for command, option in NUMERIC_OPTIONS
    for value in [*NOT_NUMBERS, *([] if (command, option) in NEGATIVE_ALLOWED else ["-1"])]
]


@pytest.mark.parametrize(
    ("command", "option", "value"), CASES, ids=[" ".join(case) for case in CASES]
)
def test_a_bad_number_is_one_line_naming_the_option(
    env: dict[str, str], command: str, option: str, value: str
) -> None:
    done = fencelock_cmd(env, *_args(command, option, value))
    assert done.returncode == 64, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("fencelock: "), done.stderr
    assert option in lines[0], done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["run", "--grace", "nan", "jobs/n", "--", "true"], "--grace must be a finite number"),
        (["run", "jobs/n", "--grace", "nan", "--", "true"], "--grace must be a finite number"),
        (["run", "--ttl", "-1", "jobs/n", "--", "true"], "--ttl must be > 0 seconds"),
        (["run", "--ttl", "abc", "jobs/n", "--", "true"], "--ttl takes a number of seconds"),
        (["run", "--at-least", "nans", "jobs/n", "--", "true"], "--at-least must be a finite"),
        (["run", "--at-least", "5x", "jobs/n", "--", "true"], "--at-least takes a duration"),
        (["run", "--wait", "1e300", "jobs/n", "--", "true"], "--wait must be at most one year"),
        (["top", "--once", "--limit", "1.5"], "--limit takes a whole number"),
        (["elect", "--observe", "--interval", "0", "j/e"], "--interval must be more than 0"),
    ],
)
def test_what_the_line_says(env: dict[str, str], args: list[str], words: str) -> None:
    done = fencelock_cmd(env, *args)
    assert done.returncode == 64, done.stderr
    assert words in done.stderr, done.stderr
