"""The docs site builds in strict mode: every page in the nav, the API reference from
the docstrings, and no broken link or anchor (MkDocs's own checks)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest


@pytest.fixture
def site(built_site: Path) -> Path:
    return built_site


def test_the_docs_site_builds_with_no_broken_link(site: Path) -> None:
    assert (site / "choosing" / "index.html").exists()
    reference = (site / "reference" / "client" / "index.html").read_text()
    assert "A mutual-exclusion lock on" in reference  # Client.lock's docstring
    assert "metrics_bench.py" in (site / "bench" / "index.html").read_text()  # the tables


def test_the_pages_load_nothing_from_elsewhere_and_script_no_bad_ids(site: Path) -> None:
    pages = sorted(p for p in site.rglob("*.html") if p.name != "404.html")
    assert len(pages) > 20
    for page in pages:
        html = page.read_text()
        where = page.relative_to(site)
        external = re.findall(r'<(?:script|link)[^>]*(?:src|href)="(https?://[^"]+)"', html)
        assert not external, f"{where} loads {external} (offline it would not)"
        bad_ids = re.findall(r'id="(\d[^"]*)"', html)
        assert not bad_ids, f"{where}: ids {bad_ids} (querySelector refuses them)"
    for page in sorted((site / "reference").rglob("*.html")):
        html = page.read_text()
        roles = re.findall(r":(?:class|meth|func|attr|mod|exc):<code>", html)
        assert not roles, f"{page.relative_to(site)} shows raw Sphinx roles: {roles[:3]}"
        assert "_ClientBase" not in html, "a private base class shown"
    guide = (site / "guide" / "index.html").read_text()
    assert '<div class="highlight">' in guide  # code coloured without a script
