from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import fencelock

FENCELOCK = str(Path(sys.executable).parent / "fencelock")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """An environment whose default backend is a fresh SQLite file (made, empty: a
    command that only looks finds no store where there is no file)."""
    url = f"sqlite:///{tmp_path / 'locks.db'}"
    fencelock.connect(url).close()
    return dict(os.environ, FENCELOCK_URL=url)


def running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (a zombie runs no code)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def fencelock_cmd(
    env: dict[str, str],
    *args: str,
    timeout: float = 30,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [FENCELOCK, *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
