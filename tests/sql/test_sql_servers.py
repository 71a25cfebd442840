"""The throwaway MariaDB and PgBouncer launchers: they answer on their own loopback
port, MariaDB keeps its rows across a SIGKILL, and PgBouncer pools in the mode asked."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import psycopg
import pymysql
import pytest

from fencelock.testing import (
    KINDS,
    MariaDBServer,
    PgBouncerServer,
    PostgreSQLServer,
    ServerPool,
)


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerPool]:
    with ServerPool(tmp_path_factory.mktemp) as servers:
        yield servers


@pytest.fixture(scope="module")
def mariadb(pool: ServerPool) -> MariaDBServer:
    return pool.mariadb()


@pytest.fixture(scope="module")
def postgres(pool: ServerPool) -> PostgreSQLServer:
    return pool.postgresql()


def connect_mariadb(url: str) -> pymysql.connections.Connection[Any]:
    """A PyMySQL connection from the parts of a ``mysql://`` URL."""
    credentials, rest = url.removeprefix("mysql://").split("@")
    user, password = credentials.split(":")
    address, database = rest.split("/")
    host, port = address.split(":")
    return pymysql.connect(
        host=host, port=int(port), user=user, password=password, database=database
    )


def test_both_kinds_are_registered() -> None:
    assert KINDS["mariadb"] is MariaDBServer
    assert KINDS["pgbouncer"] is PgBouncerServer


def test_mariadb_answers_its_url_with_the_password(mariadb: MariaDBServer) -> None:
    assert mariadb.url == f"mysql://root:fencelock@127.0.0.1:{mariadb.port}/fencelock"
    with connect_mariadb(mariadb.url) as conn, conn.cursor() as cursor:
        cursor.execute("SELECT DATABASE(), @@port, @@version, @@pid_file")
        row = cursor.fetchone()
    assert row is not None
    database, port, version, pid_file = row
    assert (database, port) == ("fencelock", mariadb.port)
    assert version.startswith("10.11.")
    assert "MariaDB" in version
    assert pid_file == str(mariadb.data / "m.pid")
    wrong = mariadb.url.replace(":fencelock@", ":wrong@")
    with pytest.raises(pymysql.err.OperationalError, match="Access denied"):
        connect_mariadb(wrong)
    assert "ready for connections" in mariadb.log()


def test_mariadb_rows_survive_a_kill_and_restart(pool: ServerPool) -> None:
    server = pool.mariadb(name="mariadb-restarted")
    table = f"t_{secrets.token_hex(3)}"
    server.sql(f"CREATE TABLE {table} (id INT PRIMARY KEY, name VARCHAR(64)) ENGINE=InnoDB")
    server.sql(f"INSERT INTO {table} VALUES (%s, %s), (%s, %s)", (1, "één", 2, "two"))
    pid = server.pid
    server.kill()  # SIGKILL: InnoDB recovers from its redo log
    assert not server.alive
    server.start()
    assert server.pid != pid
    assert server.sql(f"SELECT id, name FROM {table} ORDER BY id") == [(1, "één"), (2, "two")]


def test_a_paused_mariadb_answers_only_once_resumed(mariadb: MariaDBServer) -> None:
    mariadb.pause()
    try:
        with pytest.raises(pymysql.err.OperationalError):
            mariadb.sql("SELECT 1", timeout=0.5)
    finally:
        mariadb.resume()
    assert mariadb.sql("SELECT 1") == [(1,)]


def test_pgbouncer_answers_its_url_and_reaches_the_upstream(
    pool: ServerPool, postgres: PostgreSQLServer
) -> None:
    bouncer = pool.pgbouncer(postgres, name="pgbouncer-url")
    assert bouncer.url == f"postgresql://postgres:fencelock@127.0.0.1:{bouncer.port}/postgres"
    assert bouncer.port != postgres.port
    with psycopg.connect(bouncer.url, autocommit=True) as conn:
        row = conn.execute("SELECT inet_server_port(), current_user").fetchone()
    assert row == (postgres.port, "postgres")
    config = {key: value for key, value, *_ in bouncer.admin("SHOW CONFIG")}
    assert config["listen_port"] == str(bouncer.port)
    assert config["pool_mode"] == "transaction"


@pytest.mark.parametrize("pool_mode", ["transaction", "session"])
def test_pgbouncer_pools_in_the_mode_asked(
    pool: ServerPool, postgres: PostgreSQLServer, pool_mode: str
) -> None:
    """Client A's first query leaves a server connection idle; client B takes it and
    holds it in a transaction. In transaction mode A's next query then runs on
    another server backend; in session mode A keeps its own throughout."""
    bouncer = pool.pgbouncer(postgres, pool_mode=pool_mode, name=f"pgbouncer-{pool_mode}")
    pid = "SELECT pg_backend_pid()"
    with (
        psycopg.connect(bouncer.url, autocommit=True) as a,
        psycopg.connect(bouncer.url, autocommit=True) as b,
    ):
        first = a.execute(pid).fetchone()
        with b.transaction():
            held = b.execute(pid).fetchone()
            second = a.execute(pid).fetchone()
    if pool_mode == "transaction":
        assert held == first
        assert second != first
    else:
        assert held != first
        assert second == first


def test_pgbouncer_comes_back_after_a_kill(pool: ServerPool, postgres: PostgreSQLServer) -> None:
    bouncer = pool.pgbouncer(postgres, name="pgbouncer-restarted")
    bouncer.kill()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(bouncer.url, connect_timeout=2)
    bouncer.start()
    assert bouncer.sql("SELECT 1") == [(1,)]
