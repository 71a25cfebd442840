"""The sdist and the wheel, built once for the session (once across xdist workers)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Dist:
    wheel: Path
    sdist: Path


@dataclass(frozen=True)
class Installed:
    """A fresh virtual environment with the wheel installed in it (not editable)."""

    root: Path
    extras: str

    @property
    def python(self) -> str:
        return str(self.root / "bin" / "python")

    @property
    def fencelock(self) -> str:
        return str(self.root / "bin" / "fencelock")

    def run(self, *args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """``args`` in this environment alone: its bin first on PATH, no PYTHONPATH."""
        env = {"PATH": f"{self.root / 'bin'}:/usr/bin:/bin", "HOME": str(cwd), "LANG": "C.UTF-8"}
        return subprocess.run(
            list(args),
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def python_code(self, code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        return self.run(self.python, "-c", code, cwd=cwd)


def _build(out: Path) -> Dist:
    done = out / "done"
    if not done.exists():
        subprocess.run(
            [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
            check=True,
            capture_output=True,
            text=True,
            timeout=600,
        )
        done.touch()
    return Dist(wheel=next(out.glob("fencelock-*.whl")), sdist=next(out.glob("fencelock-*.tar.gz")))


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    """Built from the sdist (``python -m build`` makes the wheel from it), so a file the
    sdist leaves out is missing from the wheel too."""
    # One directory for every xdist worker of this run (their base's parent); without
    # xdist the base is the run's own (its parent holds every earlier run's).
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    out = shared / "fencelock-dist"
    out.mkdir(exist_ok=True)
    with (shared / "fencelock-dist.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build(out)


def install(dist: Dist, where: Path, extras: str = "") -> Installed:
    """A venv at ``where`` with ``fencelock[extras]`` from the wheel, nothing else."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    spec = f"{dist.wheel}[{extras}]" if extras else str(dist.wheel)
    pip = [sys.executable, "-m", "pip", "--python", str(where / "bin" / "python")]
    subprocess.run(
        [*pip, "install", "-q", "--disable-pip-version-check", spec],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return Installed(where, extras)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A working directory outside the source tree (so ``src/`` cannot be imported)."""
    work = tmp_path / "work"
    work.mkdir()
    return work
