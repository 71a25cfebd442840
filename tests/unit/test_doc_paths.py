"""Every source path the docs and bench/README.md name exists (they went stale once)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PAGES = [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# `backends/redis/wire.py`, `src/fencelock/engine/acquire.py`, `tests/contract/conftest.py`
NAMED = re.compile(r"`((?:src/fencelock/|tests/|bench/)?[\w/]+\.py)`")
# Named as not ours: a peer library's file, DESIGN.md's names for what is built otherwise.
ELSEWHERE = {"tooz/drivers/pgsql.py", "primitives/multilock.py", "primitives/schedule.py"}


def _exists(named: str) -> bool:
    if named.startswith(("src/", "tests/", "bench/")):
        return (ROOT / named).exists()
    source = ROOT / "src" / "fencelock"
    return any(path.as_posix().endswith("/" + named) for path in source.rglob("*.py")) or any(
        (ROOT / top / named).exists() for top in ("", "tests", "bench", "examples")
    )


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_every_named_source_file_exists(page: Path) -> None:
    missing = sorted(
        {
            m
            for m in NAMED.findall(page.read_text())
            if "/" in m and m not in ELSEWHERE and not _exists(m)
        }
    )
    assert missing == [], f"{page.name} names files that are not there"
