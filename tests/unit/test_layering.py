"""Layers that a plain install depends on: no module outside a backend family imports
that family (only the registry, ``fencelock.backends``, does, and only when its scheme
is used), and ``import fencelock`` with every optional driver blocked still locks."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import fencelock.backends

PACKAGE = Path(fencelock.__file__).parent
FAMILIES = {"redis", "redlock", "etcd", "zookeeper", "postgresql", "mysql", "sqlite", "memory"}
# redlock runs on the redis family's wire and scripts, with the same driver and extra
MAY_IMPORT = {"redlock": {"redis"}}
REGISTRY = PACKAGE / "backends" / "__init__.py"
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
]


def _imported(path: Path) -> list[str]:
    """Every module ``path`` imports, at any depth (in functions and TYPE_CHECKING too)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
            names += [f"{node.module}.{alias.name}" for alias in node.names]
    return names


def _family_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] == ["fencelock", "backends"] and len(parts) > 2 and parts[2] in FAMILIES:
        return parts[2]
    return None


def _own_family(path: Path) -> str | None:
    relative = path.relative_to(PACKAGE).parts
    if relative[0] == "backends" and len(relative) > 1:
        return Path(relative[1]).stem if Path(relative[1]).stem in FAMILIES else None
    return None


def test_no_module_outside_a_family_imports_it() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == REGISTRY:
            continue
        own = _own_family(path)
        allowed = {own} | MAY_IMPORT.get(own or "", set())
        for module in _imported(path):
            family = _family_of(module)
            if family is not None and family not in allowed:
                offenders.append(f"{path.relative_to(PACKAGE)} imports {module}")
    assert offenders == []


def test_the_layering_check_sees_a_family_import() -> None:
    assert _family_of("fencelock.backends.redis.handoff") == "redis"
    assert _family_of("fencelock.backends.base") is None
    assert "fencelock.backends.redis.handoff" in _imported(REGISTRY)  # inside a function
    assert _own_family(PACKAGE / "backends" / "redis" / "wire.py") == "redis"
    assert _own_family(PACKAGE / "client.py") is None


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
    assert lines[0] == "token 1" and lines[1] == "semaphore True"
    assert "pip install 'fencelock[redis]'" in lines[2]
    assert lines[3] == "loaded []"
