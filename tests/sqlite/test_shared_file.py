"""One SQLite lock file shared by several users of a host (docs/backends.md).

The default file is per user (``~/.local/state``), so users share locks only through a
file they all name, in a group-writable directory. The backend creates that file as the
umask allows (SQLite alone would make it 0644 whatever the umask), and SQLite gives its
``-wal`` and ``-shm`` files the database's mode.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX modes")

ROOT = Path(__file__).resolve().parents[2]


def _run(script: str, *, umask: int, home: Path) -> str:
    """``script`` in a fresh Python with ``umask`` and ``HOME``; its stdout."""
    env = {k: v for k, v in os.environ.items() if k not in ("FENCELOCK_URL", "XDG_STATE_HOME")}
    env["HOME"] = str(home)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
        preexec_fn=lambda: os.umask(umask),
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_new_lock_file_and_its_wal_follow_the_umask(tmp_path: Path) -> None:
    path = tmp_path / "shared" / "locks.db"
    out = _run(
        f"""
        import os, stat, fencelock
        with fencelock.connect("sqlite:///{path}") as client, client.lock("deploy/prod"):
            for suffix in ("", "-wal", "-shm"):
                print(suffix or "db", oct(stat.S_IMODE(os.stat("{path}" + suffix).st_mode)))
        """,
        umask=0o002,
        home=tmp_path / "home-a",
    )
    assert out.split() == ["db", "0o664", "-wal", "0o664", "-shm", "0o664"], out


def test_the_default_umask_still_keeps_the_file_to_its_user(tmp_path: Path) -> None:
    path = tmp_path / "locks.db"
    _run(
        f"""
        import fencelock
        fencelock.connect("sqlite:///{path}").close()
        """,
        umask=0o022,
        home=tmp_path,
    )
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


# -- two users, one file (root only: it takes two uids) ---------------------------------

USERS = (65531, 65532)  # uids with no other files on the host
GROUP = 65530  # the group both users are in


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """``/tmp/fencelock-shared-*/locks``: mode 2775, group GROUP, as docs/backends.md says.

    Not under pytest's tmp_path, whose parents other users cannot enter.
    """
    top = Path(tempfile.mkdtemp(prefix="fencelock-shared-"))
    top.chmod(0o755)
    shared = top / "locks"
    shared.mkdir()
    os.chown(shared, 0, GROUP)
    shared.chmod(0o2775)
    yield shared
    shutil.rmtree(top, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run as two users")
def test_two_users_share_one_lock_file_in_a_group_directory(
    shared_dir: Path, tmp_path: Path
) -> None:
    urls = [f"sqlite:///{shared_dir / 'locks.db'}", f"sqlite:///{tmp_path / 'scratch.db'}"]
    done = subprocess.run(
        [sys.executable, "-m", "tests.sqlite.two_users", *urls, str(GROUP), *map(str, USERS)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.split("\n")[:3] == ["a 1", "b busy", "b 2"], done.stdout + done.stderr
    db = (shared_dir / "locks.db").stat()
    assert db.st_uid == USERS[0]
    assert db.st_gid == GROUP  # made by the first user, in the group
    assert stat.S_IMODE(db.st_mode) == 0o664
