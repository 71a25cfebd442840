"""fencelock.integrations.django, by Django's own test runner (tests/django_app/checks.py)
on a real PostgreSQL (psycopg 3), a real MariaDB (PyMySQL as mysqlclient) and on
SQLite (a file): the app's migration, the fence
in an atomic block, the fenced update, the metrics and ``manage.py fencelock_run``; and
docs/integrations/django.md run. The suite runs it on the Django it installs (5.x);
scripts/python-matrix.sh on Django 4.2 LTS as well."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["postgresql", "mysql", "sqlite"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgresql":
        url: str = request.getfixturevalue("postgres").url
        return url
    if request.param == "mysql":
        url = request.getfixturevalue("mariadb").url
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
    assert "Ran 19 tests" in report, report


# --- docs/integrations/django.md ---------------------------------------------------------

PAGE = ROOT / "docs" / "integrations" / "django.md"
SNIPPET = re.compile(r"^```python\n# (\S+)\n(.*?)^```", re.S | re.M)
BASE_SETTINGS = (
    "from tests.django_app.settings import DATABASES, DEFAULT_AUTO_FIELD, SECRET_KEY, USE_TZ\n"
)


def page_files() -> dict[str, str]:
    """Each python block of the page under the file its first line names."""
    files: dict[str, str] = {}
    for path, code in SNIPPET.findall(PAGE.read_text()):
        files[path] = files.get(path, "") + code
    return files


def test_the_page_names_a_file_for_every_block() -> None:
    blocks = re.findall(r"^```python\n", PAGE.read_text(), re.M)
    assert len(SNIPPET.findall(PAGE.read_text())) == len(blocks)
    assert {"settings.py", "shop/models.py", "check.py"} <= set(page_files())


@pytest.fixture(params=["postgresql", "mysql", "sqlite"])
def fresh_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database of its own: a new one on the session's PostgreSQL or MariaDB, or a
    new file."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'shop.sqlite3'}"
    server = request.getfixturevalue("postgres" if request.param == "postgresql" else "mariadb")
    name = f"page_{secrets.token_hex(4)}"
    server.sql(f"CREATE DATABASE {name}")
    base: str = server.url
    return base.rsplit("/", 1)[0] + f"/{name}"


def test_the_page_runs(fresh_database_url: str, tmp_path: Path) -> None:
    """The page's files in a new project: makemigrations, migrate, then check.py."""
    project = tmp_path / "project"
    for path, code in page_files().items():
        target = project / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(BASE_SETTINGS + code if path == "settings.py" else code)
    (project / "shop" / "__init__.py").touch()
    env = dict(
        os.environ,
        TEST_DATABASE_URL=fresh_database_url,
        FENCELOCK_URL=f"sqlite:///{tmp_path / 'locks.db'}",
        DJANGO_SETTINGS_MODULE="settings",
        PYTHONPATH=os.pathsep.join([str(project), str(ROOT)]),
    )
    for step in (
        ["-m", "django", "makemigrations", "shop"],
        ["-m", "django", "migrate", "--noinput"],
        ["check.py"],
    ):
        done = subprocess.run(
            [sys.executable, *step], cwd=project, env=env, capture_output=True, text=True,
            timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, f"{step}: {done.stdout}{done.stderr}"
    assert "stale fencing token" in done.stdout
