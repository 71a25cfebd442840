"""Every ``python`` example of docs/primitives.md runs as it is, on the embedded SQLite
backend, and its cron line's ``fencelock run`` does what the page says."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

PAGE = Path(__file__).parents[2] / "docs" / "primitives.md"
TEXT = PAGE.read_text()
EXAMPLES = re.findall(r"```python\n(.*?)```", TEXT, flags=re.S)
FENCELOCK = Path(sys.executable).parent / "fencelock"


def _env(tmp_path: Path) -> dict[str, str]:
    return dict(os.environ, FENCELOCK_URL=f"sqlite:///{tmp_path / 'locks.db'}")


def _run(argv: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = _env(tmp_path)
    return subprocess.run(argv, check=False, env=env, capture_output=True, text=True, timeout=60)


def test_the_page_has_an_example_for_each_primitive() -> None:
    text = "\n".join(EXAMPLES)
    for api in (
        "multi_lock",
        "fencelock.once",
        "SKIPPED",
        "campaign",
        "resign",
        "rw_lock",
        "latch",
        "barrier",
        "double_barrier",
        "group",
        "assign",
    ):
        assert api in text, api


@pytest.mark.parametrize("number", range(len(EXAMPLES)))
def test_example_runs(number: int, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", EXAMPLES[number]],
        check=False,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"example {number + 1}:\n{done.stderr}"
    assert "Traceback" not in done.stderr
    if "nightly_report" in EXAMPLES[number]:
        assert done.stdout.split() == ["sent", "True"]


def test_the_cron_line_runs_once_then_skips(tmp_path: Path) -> None:
    (line,) = (x for x in TEXT.splitlines() if x.startswith("*/5 * * * *"))
    argv = shlex.split(line)[5:]
    marker = tmp_path / "report"
    argv[argv.index("/usr/local/bin/make-report")] = "touch"
    argv.append(str(marker))
    argv[0] = str(FENCELOCK)
    first = _run(argv, tmp_path)
    assert first.returncode == 0, first.stderr
    assert marker.exists(), first.stderr
    marker.unlink()
    second = _run(argv, tmp_path)
    assert second.returncode == 0
    assert second.stderr == ""
    assert not marker.exists()  # within the 30 s of --at-least: skipped
