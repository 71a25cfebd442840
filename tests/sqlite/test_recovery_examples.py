"""Every example of docs/recovery.md runs as it is, on the embedded SQLite backend."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

PAGE = Path(__file__).parents[2] / "docs" / "recovery.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)


def test_the_page_has_an_example_for_each_api() -> None:
    text = "\n".join(EXAMPLES)
    for api in ("stop_on_loss=True", "lease.check()", "lost_event", "on_lost", "max_hold"):
        assert api in text, api
    assert "aconnect" in text
    assert "fencelock.connect" in text


@pytest.mark.parametrize("number", range(len(EXAMPLES)))
def test_example_runs(number: int, tmp_path: Path) -> None:
    env = dict(os.environ, FENCELOCK_URL=f"sqlite:///{tmp_path / 'locks.db'}")
    done = subprocess.run(
        [sys.executable, "-c", EXAMPLES[number]],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"example {number + 1}:\n{done.stderr}"
    assert "Traceback" not in done.stderr
