"""The docs site, built once per test process however many test files read it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_built: list[Path] = []


def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site's directory, as ``mkdocs build --strict`` writes it (the first call builds)."""
    if not _built:
        site = tmp_path_factory.mktemp("site")
        done = subprocess.run(
            [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
            cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        _built.append(site)
    return _built[0]
