"""Result files: the JSON document and its Markdown tables, the environment, noise warnings."""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

import fencelock
from harness.tables import table_markdown

RESULTS_DIR = Path(__file__).resolve().parents[1] / "results"
REPO_ROOT = RESULTS_DIR.parents[1]
NOISY_ROUNDS = 1.25  # rounds of one row further apart than this (max / min) get a warning


def clean_json(value: Any) -> Any:
    """NaN (an empty sample) becomes null so the JSON stays strict."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: clean_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_json(v) for v in value]
    return value


def load_average() -> tuple[float, float, float] | None:
    return os.getloadavg() if hasattr(os, "getloadavg") else None


def command(*argv: str) -> str | None:
    """What a command printed (stripped), or None if it is missing or failed to run."""
    if shutil.which(argv[0]) is None:
        return None
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=10)  # noqa: S603 (an argument list the bench passes, no shell)
        return done.stdout.strip() or None
    return None


def git_state() -> str | None:
    """The commit measured, with "-dirty" if the work tree had changes (read-only git)."""
    return command("git", "-C", str(REPO_ROOT), "describe", "--always", "--dirty")


def environment(**extra: Any) -> dict[str, Any]:
    """What every result file records about the machine and the code measured."""
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "fencelock": fencelock.__version__,
        "fencelock_source": str(Path(fencelock.__file__).parent),
        "git": git_state(),
        "load_average_at_end": load_average(),
        **extra,
    }


def stamped(prefix: str, suffix: str = ".json") -> Path:
    """``bench/results/<prefix>-<timestamp><suffix>``, the directory made."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    return RESULTS_DIR / f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}{suffix}"


def write_results(
    prefix: str, document: dict[str, Any], tables: Sequence[Table] = (), heading: str = ""
) -> Path:
    """The JSON document (strict: NaN as null), and the tables as Markdown beside it."""
    path = stamped(prefix)
    body = {"benchmark": document.pop("benchmark", prefix), "timestamp": timestamp(), **document}
    path.write_text(json.dumps(clean_json(body), indent=2, allow_nan=False) + "\n")
    if tables:
        markdown = "\n".join(table_markdown(table) for table in tables)
        path.with_suffix(".md").write_text(f"{heading}\n\n{markdown}" if heading else markdown)
    return path


def write_fleet_results(
    prefix: str,
    script: str,
    sections: Sequence[str],
    document: dict[str, Any],
    found: dict[str, Any],
    started: float,
    load: tuple[float, ...],
) -> Iterator[Path]:
    """A fleet benchmark's results: ``bench/results/<prefix>-<timestamp>.md`` (a heading,
    then ``sections``, then the versions ``found``) and the ``.json`` beside it
    (``document``, the machine and the load average at both ends added); each path as it
    is written."""
    markdown = stamped(prefix, ".md")
    end = os.getloadavg()
    heading = (
        f"{script}, {time.strftime('%Y-%m-%d')}, commit {found['git']}, "
        f"{os.cpu_count()} cores, load average {' '.join(f'{x:.2f}' for x in load)} at the "
        f"start, {' '.join(f'{x:.2f}' for x in end)} at the end, "
        f"{time.monotonic() - started:.0f} s"
    )
    markdown.write_text("\n\n".join([heading, *sections, json.dumps(found)]) + "\n")
    yield markdown
    document["environment"] = {
        **found,
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "load_average_at_start": load,
        "load_average_at_end": end,
    }
    path = markdown.with_suffix(".json")
    path.write_text(json.dumps(clean_json(document), indent=2) + "\n")
    yield path


def timestamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def noise_warnings(
    rows: Iterable[tuple[str, Sequence[float]]], load_at_start: tuple[float, ...] | None
) -> list[str]:
    """Rows whose rounds disagree, and a busy host: the ratios are not to be trusted then."""
    found = []
    for label, rates in rows:
        if len(rates) > 1 and min(rates) > 0 and max(rates) / min(rates) > NOISY_ROUNDS:
            found.append(
                f"{label}: rounds range {min(rates):,.0f}-{max(rates):,.0f} cycles/s "
                f"(more than {NOISY_ROUNDS - 1:.0%} apart)"
            )
    busy = max((x[0] for x in (load_at_start, load_average()) if x), default=0.0)
    if busy > (os.cpu_count() or 1):
        found.append(f"load average {busy:.1f} on {os.cpu_count()} CPUs: other work was running")
    return found


def confirmed_rise(
    risen: list[str], again: Callable[[list[str]], list[str]], allowed: float, what: str
) -> int:
    """A regression check's verdict: 1 if a rise over the baseline shows twice. The
    backends that rose (``risen``) are measured again (``again`` returns those still
    risen), so that one busy moment of a shared machine fails nothing."""
    if risen:
        print(f"measuring again: {', '.join(risen)}")
        risen = again(risen)
    if risen:
        print(f"{what} rose more than {allowed:.0%} on: {', '.join(risen)}")
        return 1
    print(f"no rise of {what} over the baseline")
    return 0
