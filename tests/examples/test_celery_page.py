"""docs/integrations/celery.md, run: its tasks module in a real prefork worker over a real
Redis, then its sender: both charges, each under a token of its own, and one report."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.examples.celery_worker import ROOT, celery_worker

PAGE = ROOT / "docs" / "integrations" / "celery.md"
SNIPPET = re.compile(r"^```python\n# (\S+)\n(.*?)^```", re.S | re.M)


def test_the_page_runs(tmp_path: Path) -> None:
    files = dict(SNIPPET.findall(PAGE.read_text()))
    assert set(files) == {"shop_tasks.py", "send.py"}
    for name, code in files.items():
        (tmp_path / name).write_text(code)
    with celery_worker("shop_tasks", tmp_path / "worker", path=tmp_path) as env:
        done = subprocess.run(
            [sys.executable, "send.py"], cwd=tmp_path, env=env, capture_output=True,
            text=True, timeout=180, check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()[:2]
    assert first.startswith("charged 1200 on order 42 under token ")
    assert second.startswith("charged 800 on order 42 under token ")
    assert int(second.rsplit(" ", 1)[1]) != int(first.rsplit(" ", 1)[1])
