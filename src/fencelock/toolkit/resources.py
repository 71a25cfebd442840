"""The SQLite files the tools' workers share: made afresh for every run or round."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

from fencelock.fencing import install_sqlite_fences


def remove_database(path: Path) -> None:
    """Delete the SQLite database at ``path`` and its journal files, if there are any."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(str(path) + suffix).unlink(missing_ok=True)


@contextlib.contextmanager
def fresh_database(
    path: Path, connect: Callable[[Path], sqlite3.Connection], schema: str
) -> Iterator[sqlite3.Connection]:
    """A new WAL-mode database at ``path`` with ``schema`` and the fencing functions.

    Any old database there is removed first; the connection is closed on leaving.
    """
    remove_database(path)
    conn = connect(path)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.executescript(schema)
        install_sqlite_fences(conn)
        yield conn
    finally:
        conn.close()
