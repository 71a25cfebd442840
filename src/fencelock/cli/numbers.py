"""Every number given on the command line, checked in one place: :func:`checked`.

A number that is not one (``nan``), an infinity, or one outside what its option allows
is a usage error naming the option (one line, exit 64), before anything runs: a NaN
compares false with everything, so a later ``grace > limit`` would let it through.
A lease's TTL gets the library's own check (:func:`~fencelock.engine.timing.validate_ttl`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import click

from fencelock.cli import exitcodes, fail
from fencelock.engine.timing import MAX_TTL, validate_ttl
from fencelock.errors import ConfigError

FC = TypeVar("FC", bound=Callable[..., object])

__all__ = ["COUNT", "INTERVAL", "SECONDS", "TTL", "Bounds", "Duration", "Number", "checked"]


@dataclass(frozen=True)
class Bounds:
    """What an option takes: ``least`` (excluded if ``above``) to ``most``; ``whole``: an
    int; ``ttl``: a lease's TTL, checked as the library checks one."""

    least: float | None = 0.0
    above: bool = False
    most: float | None = MAX_TTL
    whole: bool = False
    ttl: bool = False
    unit: str = "seconds"


SECONDS = Bounds()  # a duration: 0 up to a year
INTERVAL = Bounds(above=True)  # how often to look: more than 0, up to a year
TTL = Bounds(least=None, most=None, ttl=True)  # validate_ttl's range: 10 ms up to a year
COUNT = Bounds(least=None, most=None, whole=True, unit="")  # any int


def checked(value: object, option: str, bounds: Bounds = SECONDS) -> float:
    """``value`` (the text given, or a number) within ``bounds``; else :class:`ConfigError`
    naming ``option`` and what is wrong. NaN and infinities never pass. A ``whole``
    number comes back as an int."""
    text = value.strip() if isinstance(value, str) else _text(value)
    number: float
    try:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ValueError(text)
        number = int(value) if bounds.whole else float(value)
    except (ValueError, OverflowError):
        kind = "a whole number" if bounds.whole else f"a number of {bounds.unit}"
        raise ConfigError(f"{option} takes {kind.removesuffix(' of ')}, not {text!r}") from None
    if not math.isfinite(number):
        raise ConfigError(f"{option} must be a finite number, not {text}")
    if bounds.ttl:
        return validate_ttl(number, option)
    least, most = bounds.least, bounds.most
    if least is not None and (number <= least if bounds.above else number < least):
        wanted = "more than" if bounds.above else "at least"
        raise ConfigError(f"{option} must be {wanted} {_shown(least, bounds)}, got {text}")
    if most is not None and number > most:
        raise ConfigError(f"{option} must be at most {_shown(most, bounds)}, got {text}")
    return number


def _text(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _shown(value: float, bounds: Bounds) -> str:
    if value == MAX_TTL and bounds.unit == "seconds":
        return "one year"
    return f"{value:g} {bounds.unit}".rstrip()


def _option(param: click.Parameter | None) -> str:
    """How the user wrote the option: its longest name (``--grace``)."""
    if param is None:
        return "a number"
    return max(param.opts, key=len) if param.opts else (param.name or "a number")


class Number(click.ParamType):  # type: ignore[type-arg]
    """A click type that passes the text through :func:`checked`: a bad number is one
    line on stderr and exit 64 (EX_USAGE), as every usage error of the command."""

    def __init__(self, bounds: Bounds = SECONDS) -> None:
        self.bounds = bounds
        self.name = "integer" if bounds.whole else (bounds.unit or "number")

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        return self.check(value, param)

    def check(self, value: object, param: click.Parameter | None) -> float:
        try:
            return checked(value, _option(param), self.bounds)
        except ConfigError as exc:
            fail(str(exc), exitcodes.USAGE)


_UNITS = (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0))  # "ms" before "s"


class Duration(Number):
    """Seconds, written ``30``, ``30s``, ``250ms``, ``5m`` or ``1h``."""

    def __init__(self, bounds: Bounds = SECONDS) -> None:
        super().__init__(bounds)
        self.name = "duration"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if not isinstance(value, str):
            return self.check(value, param)
        text = value.strip()
        number, scale = text, 1.0
        for unit, unit_scale in _UNITS:
            if text.endswith(unit) and text[: -len(unit)].strip():
                number, scale = text[: -len(unit)], unit_scale
                break
        try:
            seconds = float(number) * scale
        except ValueError:
            fail(
                f"{_option(param)} takes a duration (30, 30s, 250ms, 5m, 1h), not {text!r}",
                exitcodes.USAGE,
            )
        return self.check(seconds, param)


def ttl_option(default: float, help: str) -> Callable[[FC], FC]:
    """A command's ``--ttl``: a lease TTL in seconds, checked as every TTL is."""
    return click.option("--ttl", type=Number(TTL), default=default, show_default=True, help=help)
