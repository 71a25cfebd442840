"""Command-line options every benchmark spells the same way."""

from __future__ import annotations

import argparse
from dataclasses import dataclass


def parser(doc: str | None, quick: str = "a short smoke run") -> argparse.ArgumentParser:
    """A parser described by the first line of ``doc``, with ``--quick``."""
    made = argparse.ArgumentParser(description=(doc or "").strip().splitlines()[0])
    made.add_argument("--quick", action="store_true", help=quick)
    return made


def add_contended(made: argparse.ArgumentParser, seconds: float, workers: int = 8) -> None:
    """``--workers``, ``--seconds`` (a contended run's length) and ``--hold-ms``."""
    made.add_argument("--workers", type=int, default=workers, help="contending processes")
    made.add_argument("--seconds", type=float, default=seconds, help="contended run length")
    made.add_argument("--hold-ms", type=float, default=1.0, help="critical section length")


def add_rounds(made: argparse.ArgumentParser, rounds: int = 5, seconds: float = 0.5) -> None:
    """``--rounds`` and ``--seconds`` (one interleaved round's length)."""
    made.add_argument("--rounds", type=int, default=rounds, help="interleaved rounds each")
    made.add_argument("--seconds", type=float, default=seconds, help="one round's length")


def add_backends(made: argparse.ArgumentParser, backends: tuple[str, ...]) -> None:
    made.add_argument("--backends", default=",".join(backends), help="comma-separated")


def backends(made: argparse.ArgumentParser, value: str, known: tuple[str, ...]) -> list[str]:
    """The ``--backends`` asked for, each one of ``known``."""
    wanted = [b for b in value.split(",") if b]
    if unknown := set(wanted) - set(known):
        made.error(f"no such backend: {', '.join(sorted(unknown))} (one of {', '.join(known)})")
    return wanted


def scenarios(made: argparse.ArgumentParser, only: str, count: int) -> tuple[int, ...]:
    """``--only 1,3``: the scenario numbers asked for, each from 1 to ``count``."""
    try:
        found = tuple(sorted({int(s) for s in only.split(",") if s.strip()}))
    except ValueError:
        found = ()
    if not found or not set(found) <= set(range(1, count + 1)):
        made.error(f"--only takes scenario numbers 1-{count}, e.g. --only 1,3")
    return found


def contended_ok(made: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.workers < 2 or args.seconds <= 0 or args.hold_ms < 0:
        made.error("need --workers >= 2, --seconds > 0 and --hold-ms >= 0")


@dataclass(frozen=True)
class RunSettings:
    """An uncontended-then-contended run: its interleaved rounds and its contended workers."""

    rounds: int
    round_seconds: float
    workers: int
    contended_seconds: float
    hold: float  # seconds a contended worker holds the lock
