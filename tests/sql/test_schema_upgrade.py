"""Tables made by an older fencelock (an owner of 40 hex, no grant time) are brought up
to date on first use, and then record who holds a lease and since when."""

from __future__ import annotations

import secrets
import sqlite3
import time
from pathlib import Path

import fencelock
from fencelock.testing import MariaDBServer, PostgreSQLServer

OLD_SQLITE = """
CREATE TABLE fencelock_leases (
    name TEXT PRIMARY KEY, owner TEXT, token INTEGER NOT NULL,
    expires_at REAL NOT NULL, boot TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE fencelock_queue (
    seq INTEGER PRIMARY KEY, name TEXT NOT NULL, address BLOB NOT NULL UNIQUE,
    arrived REAL NOT NULL DEFAULT 0, alive_until REAL NOT NULL DEFAULT 0);
"""


def old_postgresql(schema: str) -> list[str]:
    s = f'"{schema}"'
    return [
        f"CREATE SCHEMA {s}",
        f"CREATE SEQUENCE {s}.fencelock_tokens",
        f"CREATE TABLE {s}.fencelock_leases (name text PRIMARY KEY, owner text,"
        " token bigint NOT NULL, expires_at timestamptz)",
        f"CREATE TABLE {s}.fencelock_waiters (name text NOT NULL, waiter text NOT NULL,"
        " listener integer NOT NULL, seq bigserial, arrived timestamptz NOT NULL,"
        " alive_until timestamptz NOT NULL, PRIMARY KEY (name, waiter))",
        f"CREATE TABLE {s}.fencelock_advisory (key bigint PRIMARY KEY, name text NOT NULL,"
        " owner text, token bigint NOT NULL, ttl double precision NOT NULL)",
    ]


def old_mysql(database: str) -> list[str]:
    d = f"`{database}`"
    return [
        f"CREATE DATABASE {d}",
        f"CREATE TABLE {d}.fencelock_locks (lock_name VARCHAR(64) CHARACTER SET ascii"
        " COLLATE ascii_bin PRIMARY KEY, name VARCHAR(255) CHARACTER SET utf8mb4 COLLATE"
        " utf8mb4_bin NOT NULL, owner CHAR(40) CHARACTER SET ascii, token BIGINT NOT NULL,"
        " ttl DOUBLE NOT NULL) ENGINE = InnoDB",
        f"CREATE TABLE {d}.fencelock_keeps (lock_name VARCHAR(64) CHARACTER SET ascii"
        " COLLATE ascii_bin PRIMARY KEY, name VARCHAR(255) CHARACTER SET utf8mb4 COLLATE"
        " utf8mb4_bin NOT NULL, owner CHAR(40) CHARACTER SET ascii NOT NULL,"
        " token BIGINT NOT NULL, until DATETIME(6) NOT NULL) ENGINE = InnoDB",
    ]


def says_who_and_since_when(url: str, name: str) -> None:
    before = time.time()
    with fencelock.connect(url) as client, client.lock(name, ttl=30) as lease:
        info = client.inspect(name)
        assert info is not None
        assert info.owner == lease.owner
        assert info.holder is not None
        assert info.holder.command
        assert info.since is not None
        assert before - 0.5 <= info.since <= time.time() + 0.5


def test_an_old_sqlite_file(tmp_path: Path, name: str) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(OLD_SQLITE)
    says_who_and_since_when(f"sqlite:///{path}", name)


def test_an_old_postgresql_schema(postgres: PostgreSQLServer, name: str) -> None:
    schema = f"old_{secrets.token_hex(4)}"
    for statement in old_postgresql(schema):
        postgres.sql(statement)
    says_who_and_since_when(f"{postgres.url}?schema={schema}", name)
    advisory = postgres.url.replace("postgresql://", "postgresql+advisory://", 1)
    says_who_and_since_when(f"{advisory}?schema={schema}", name + "-advisory")


def test_old_mysql_tables(mariadb: MariaDBServer, name: str) -> None:
    database = f"old_{secrets.token_hex(4)}"
    for statement in old_mysql(database):
        mariadb.sql(statement)
    url = mariadb.url.rsplit("/", 1)[0] + f"/{database}"
    says_who_and_since_when(url, name)
    widths = mariadb.sql(
        "SELECT CHARACTER_MAXIMUM_LENGTH FROM information_schema.COLUMNS"
        " WHERE TABLE_SCHEMA = %s AND COLUMN_NAME = 'owner'",
        (database,),
    )
    assert [w for (w,) in widths] == [400, 400]
