"""The docs site builds in strict mode: every page in the nav, the API reference from
the docstrings, and no broken link or anchor (MkDocs's own checks)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_docs_site_builds_with_no_broken_link(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    assert (tmp_path / "choosing" / "index.html").exists()
    reference = (tmp_path / "reference" / "client" / "index.html").read_text()
    assert "A mutual-exclusion lock on" in reference  # Client.lock's docstring
    assert "metrics_bench.py" in (tmp_path / "bench" / "index.html").read_text()  # the tables
