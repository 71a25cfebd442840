"""Settings of the Django test project: the database from $TEST_DATABASE_URL
(``postgresql://``, ``mysql://user:password@host:port/name`` or ``sqlite:///path``),
fencelock's from $FENCELOCK_URL. Run by tests/sql/test_django.py with Django's own test
runner. MySQL through PyMySQL standing in for ``mysqlclient`` (its documented
``install_as_MySQLdb``): mysqlclient needs the MySQL C headers to build."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit


def _database(url: str) -> dict[str, Any]:
    if url.startswith("sqlite:///"):
        path = url.removeprefix("sqlite:///")
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": path, "TEST": {"NAME": path}}
    parts = urlsplit(url)
    if parts.scheme == "mysql":
        import pymysql

        pymysql.install_as_MySQLdb()
    return {
        "ENGINE": f"django.db.backends.{parts.scheme}",
        "NAME": parts.path.lstrip("/"),
        "USER": parts.username,
        "PASSWORD": parts.password,
        "HOST": parts.hostname,
        "PORT": parts.port,
    }


SECRET_KEY = "tests-only"
INSTALLED_APPS = ["fencelock.integrations.django", "tests.django_app"]
DATABASES = {"default": _database(os.environ["TEST_DATABASE_URL"])}
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
FENCELOCK_URL = os.environ.get("FENCELOCK_URL")
