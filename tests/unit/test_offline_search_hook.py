"""The docs' search hook (site_hooks/offline_search.py) changes the theme's search script
only where it knows it, and fails the build if the theme changed it."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import mkdocs
import pytest

HOOK = Path(__file__).parents[2] / "site_hooks" / "offline_search.py"
THEIRS = Path(mkdocs.__file__).parent / "contrib" / "search" / "templates" / "search" / "main.js"


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("offline_search", HOOK)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_themes_script_searches_here_opened_from_disk_and_in_a_worker_served() -> None:
    ours = _hook().offline_main_js(THEIRS.read_text())
    assert "new Worker(" in ours
    assert "if (searchHere) {" in ours
    assert "window.location.protocol === 'file:'" in ours
    assert ours.count("new Worker(") == 1  # the theme's unconditional start is gone


def test_a_changed_theme_script_fails_the_build() -> None:
    with pytest.raises(ValueError, match="changed"):
        _hook().offline_main_js("var searchWorker = new Worker('search/worker.js');")
