"""What a user installs, not the source tree: the sdist and the wheel are built and
checked, and the wheel is installed (not editable) into fresh virtual environments,
one with no extras and one per extra, each used for real."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import fencelock
from fencelock.testing import ServerPool

from .conftest import ROOT, Dist, Installed, install

# the URLs of each extra's schemes (never reached: a missing driver is said before that)
SCHEMES_OF_EXTRA = {
    "redis": ["redis://127.0.0.1:9/0", "redlock://127.0.0.1:9,127.0.0.1:10,127.0.0.1:11/0"],
    "zookeeper": ["zookeeper://127.0.0.1:9/fencelock"],
    "postgresql": ["postgresql://u@127.0.0.1:9/d", "postgresql+advisory://u@127.0.0.1:9/d"],
    "mysql": ["mysql://u@127.0.0.1:9/d"],
}

TAKE_A_LOCK = """
import sys, fencelock
with fencelock.connect(sys.argv[1]) as client:
    with client.lock("install/check", ttl=10) as lease:
        print("token", lease.token, "from", fencelock.__file__)
"""

SAY_WHAT_IS_MISSING = """
import sys, fencelock
for url in sys.argv[1:]:
    try:
        fencelock.connect(url).close()
    except fencelock.ConfigError as exc:
        print(exc)
    else:
        print("connected to", url)
"""


def _missing_extras_named(env: Installed, workdir: Path, extras: list[str]) -> None:
    urls = [url for extra in extras for url in SCHEMES_OF_EXTRA[extra]]
    done = env.run(env.python, "-c", SAY_WHAT_IS_MISSING, *urls, cwd=workdir)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == len(urls), done.stdout
    for url, line in zip(urls, lines, strict=True):
        extra = next(e for e, schemes in SCHEMES_OF_EXTRA.items() if url in schemes)
        assert f"pip install 'fencelock[{extra}]'" in line, (url, line)
        assert url.split("://")[0] + "://" in line, (url, line)


def test_the_sdist_and_the_wheel_pass_twine_and_carry_the_package_data(dist: Dist) -> None:
    checked = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(dist.wheel), str(dist.sdist)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    in_wheel = set(zipfile.ZipFile(dist.wheel).namelist())
    source = ROOT / "src"
    data = [
        p.relative_to(source).as_posix()
        for p in (source / "fencelock").rglob("*")
        if p.is_file() and p.suffix not in {".py", ".pyc"} and "__pycache__" not in p.parts
    ]
    assert "fencelock/py.typed" in data
    assert any(p.endswith(".lua") for p in data)
    assert sorted(set(data) - in_wheel) == []
    modules = [p.relative_to(source).as_posix() for p in (source / "fencelock").rglob("*.py")]
    assert sorted(set(modules) - in_wheel) == []
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in in_wheel)
    with tarfile.open(dist.sdist) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert {"README.md", "LICENSE", "pyproject.toml", "src/fencelock/py.typed"} <= names


def test_the_plain_install_runs_the_demo_a_lock_and_names_every_missing_extra(
    dist: Dist, tmp_path: Path, workdir: Path
) -> None:
    env = install(dist, tmp_path / "plain")
    version = env.run(env.fencelock, "--version", cwd=workdir)
    assert version.returncode == 0, version
    assert fencelock.__version__ in version.stdout, version
    locked = env.run(env.python, "-c", TAKE_A_LOCK, f"sqlite:///{workdir / 'l.db'}", cwd=workdir)
    assert locked.returncode == 0, locked.stderr
    assert "token 1 from " + str(tmp_path / "plain") in locked.stdout
    in_memory = env.run(env.python, "-c", TAKE_A_LOCK, "memory://", cwd=workdir)
    assert in_memory.returncode == 0, in_memory.stderr
    assert "token 1" in in_memory.stdout, in_memory.stderr
    ran = env.run(env.fencelock, "run", "--url", f"sqlite:///{workdir / 'l.db'}", "jobs/a",
                  "--", "true", cwd=workdir)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    demo = env.run(env.fencelock, "demo", cwd=workdir, timeout=300)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "no seat was sold twice" in demo.stdout
    _missing_extras_named(env, workdir, list(SCHEMES_OF_EXTRA))
    for url in ("redis://127.0.0.1:9/0", "zookeeper://127.0.0.1:9/x"):
        status = env.run(env.fencelock, "status", "--url", url, "a", cwd=workdir)
        assert status.returncode == 64, status
        assert "pip install 'fencelock[" in status.stderr, status
        assert "Traceback" not in status.stderr
    for url in ("postgresql://u@127.0.0.1:9/d", "mysql://u@127.0.0.1:9/d"):
        sql = env.run(env.fencelock, "init", "--sql", "--url", url, cwd=workdir)
        assert sql.returncode == 0, sql.stderr
        assert "CREATE TABLE" in sql.stdout, sql.stderr


def _server_url(extra: str, pool: ServerPool) -> str | None:
    if extra == "redis":
        return pool.redis().url
    if extra == "zookeeper":
        return pool.zookeeper(1)[0].url
    if extra == "postgresql":
        return pool.postgresql().url
    if extra == "mysql":
        return pool.mariadb().url
    if extra == "etcd":
        return pool.etcd(1)[0].url
    return None


IMPORTS = {
    "prometheus": "import fencelock.metrics.prometheus as m; m.register()",
    "otel": "import fencelock.metrics.otel",
}


@pytest.mark.parametrize(
    "extra", ["redis", "zookeeper", "postgresql", "mysql", "etcd", "prometheus", "otel"]
)
def test_each_extra_alone_works_and_names_the_others(
    dist: Dist, tmp_path: Path, workdir: Path, extra: str
) -> None:
    env = install(dist, tmp_path / extra, extra)
    with ServerPool.under(tmp_path / "servers") as pool:
        url = _server_url(extra, pool)
        if url is not None:
            locked = env.run(env.python, "-c", TAKE_A_LOCK, url, cwd=workdir)
            assert locked.returncode == 0, locked.stderr
            assert "token" in locked.stdout
            assert str(tmp_path / extra) in locked.stdout
    if extra in IMPORTS:
        imported = env.python_code(IMPORTS[extra], workdir)
        assert imported.returncode == 0, imported.stderr
    _missing_extras_named(env, workdir, [e for e in SCHEMES_OF_EXTRA if e != extra])
