"""The migration pages' snippets run as written, against a real redis-server (their
``redis://localhost:6379/0`` is this test's server) and embedded SQLite files in a
directory of the test's; a page's snippets share one namespace, in order, as a reader
would run them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fencelock.testing import RedisServer

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs" / "migrating").glob("*.md"))
SNIPPET = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
THEIR_URL = "redis://localhost:6379/0"


@pytest.mark.parametrize("page", PAGES, ids=[page.stem for page in PAGES])
def test_every_snippet_runs(
    page: Path, plain_redis: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the files a snippet makes (locks.db) land here
    snippets = SNIPPET.findall(page.read_text())
    assert snippets, f"{page.name} has no python snippet"
    namespace: dict[str, object] = {"__name__": f"docs.migrating.{page.stem}"}
    for number, code in enumerate(snippets, 1):
        source = code.replace(THEIR_URL.removesuffix("/0"), plain_redis.url.removesuffix("/0"))
        exec(compile(source, f"{page.name} snippet {number}", "exec"), namespace)
