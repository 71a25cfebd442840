"""The docs site, built once per test process (strict: a warning fails the build)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import docs_build


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site's directory, as ``mkdocs build --strict`` writes it."""
    return docs_build.built_site(tmp_path_factory)
