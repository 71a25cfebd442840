"""fencelock.integrations.django, by Django's own test runner (tests/django_app/checks.py)
on a real PostgreSQL (psycopg 3) and on SQLite (a file): the app's migration, the fence
in an atomic block, the fenced update, the metrics and ``manage.py fencelock_run``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["postgresql", "sqlite"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgresql":
        url: str = request.getfixturevalue("postgres").url
        return url
    return f"sqlite:///{tmp_path / 'app.sqlite3'}"


def test_the_integration_passes_djangos_test_runner(database_url: str, tmp_path: Path) -> None:
    env = dict(
        os.environ,
        TEST_DATABASE_URL=database_url,
        FENCELOCK_URL=f"sqlite:///{tmp_path / 'locks.db'}",
        DJANGO_SETTINGS_MODULE="tests.django_app.settings",
        PYTHONPATH=str(ROOT),
    )
    command = [sys.executable, "-m", "django", "test", "tests.django_app.checks", "--noinput"]
    done = subprocess.run(
        [*command, "-v", "2"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    assert "Applying fencelock.0001_initial... OK" in report  # the app's own migration
    assert "Ran 12 tests" in report, report
