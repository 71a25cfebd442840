"""Servers that refuse to run as root (``initdb``, ``postgres``, PgBouncer) run as ``nobody``.

Only when this process is root: ``setpriv`` drops to ``nobody`` and execs the program
(the PID held is the program's), and the files it reads or writes are handed to
``nobody`` first (pytest's directories are root's alone, hence a directory of ``/tmp``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

_AS_NOBODY = ("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups")


def as_nobody(argv: list[str]) -> list[str]:
    """``argv``, run as ``nobody`` if this process is root."""
    return [*_AS_NOBODY, *argv] if os.geteuid() == 0 else argv


def give_to_nobody(*paths: Path) -> None:
    """Make ``nobody`` the owner of ``paths`` if this process is root."""
    if os.geteuid() == 0:
        for path in paths:
            shutil.chown(path, "nobody", "nogroup")
