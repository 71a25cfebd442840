"""``import fencelock`` with every optional driver blocked (as on a plain install) still
takes locks on SQLite, loads the CLI, the guards and the metrics, fences an SQLite
write, and says which extra a scheme (or an integration) needs."""

from __future__ import annotations

import subprocess
import sys

OPTIONAL_DRIVERS = [
    "redis",
    "hiredis",
    "kazoo",
    "psycopg",
    "psycopg_binary",
    "aiomysql",
    "pymysql",
    "prometheus_client",
    "opentelemetry",
    "sqlalchemy",
]


BLOCKED_RUN = """
import os, sys, tempfile
for name in {drivers!r}:
    sys.modules[name] = None  # an import of it raises ModuleNotFoundError
import fencelock
import fencelock.cli, fencelock.fencing, fencelock.metrics, fencelock.check.conductor
path = os.path.join(tempfile.mkdtemp(), "locks.db")
with fencelock.connect("sqlite:///" + path) as client:
    with client.lock("layers/plain") as lease:
        print("token", lease.token)
    print("semaphore", client.semaphore("layers/s", permits=2).acquire().token > 0)
try:
    fencelock.connect("redis://127.0.0.1:9/0")
except fencelock.ConfigError as exc:
    print(exc)
try:
    import fencelock.compat.redis_py
except ImportError as exc:
    print(exc)
from fencelock import tracing
try:
    tracing.instrument()
except fencelock.ConfigError as exc:
    print(exc)
import sqlite3
from fencelock.fencing import install_sqlite_fences, sqlite_fence
shop = sqlite3.connect(os.path.join(tempfile.mkdtemp(), "shop.db"), isolation_level=None)
install_sqlite_fences(shop)
sqlite_fence(shop, "layers/fence", 2)
try:
    sqlite_fence(shop, "layers/fence", 1)
except fencelock.StaleToken as exc:
    print("fenced", exc.last)
try:
    import fencelock.integrations.sqlalchemy
except ImportError as exc:
    print(exc)
loaded = sorted(n for n in {drivers!r} if sys.modules.get(n) is not None)
print("loaded", loaded)
"""


def test_a_lock_on_sqlite_with_every_optional_driver_blocked() -> None:
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED_RUN.format(drivers=OPTIONAL_DRIVERS)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "token 1"
    assert lines[1] == "semaphore True"
    assert "pip install 'fencelock[redis]'" in lines[2]
    assert "compat.redis_py" in lines[3]
    assert "pip install 'fencelock[redis]'" in lines[3]
    assert "tracing needs the OpenTelemetry API" in lines[4]
    assert "pip install 'fencelock[otel]'" in lines[4]
    assert lines[5] == "fenced 2"  # the guard's check, fencelock.sql's, needs no driver
    assert "pip install 'fencelock[sqlalchemy]'" in lines[6]
    assert lines[7] == "loaded []"
