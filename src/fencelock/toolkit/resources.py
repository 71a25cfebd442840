"""The SQLite files the tools' workers share: made afresh for every run or round."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

from fencelock.fencing import install_sqlite_fences


def connect(path: Path | str, busy_ms: int) -> sqlite3.Connection:
    """An autocommit connection (transactions are explicit) that waits ``busy_ms`` for locks."""
    conn = sqlite3.connect(str(path), timeout=busy_ms / 1000, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout = {busy_ms}")
    return conn


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


@contextlib.contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``, rolled back if the block raises."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
