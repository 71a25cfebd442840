"""Eight processes' first use of a fresh PostgreSQL schema (or MariaDB database) at the
same instant: each makes the tables if they are missing, the CREATEs race in the
catalog, and every one of them still gets its lock."""

from __future__ import annotations

import multiprocessing
import secrets
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier

import pytest

import fencelock
from fencelock.testing import MariaDBServer, PostgreSQLServer

PROCESSES = 8


def _first_use(url: str, barrier: Barrier, name: str, said: Queue[str]) -> None:
    client = fencelock.connect(url)
    try:
        barrier.wait(60)
        with client.lock(name, ttl=30, timeout=60) as lease:
            said.put(f"ok {lease.token}")
    except Exception as exc:  # reported to the parent, which fails the test with it
        said.put(f"{type(exc).__name__}: {exc}")
    finally:
        client.close()


def _race(url: str) -> list[str]:
    context = multiprocessing.get_context("spawn")
    barrier, said = context.Barrier(PROCESSES), context.Queue()
    processes = [
        context.Process(target=_first_use, args=(url, barrier, f"race/{i}", said))
        for i in range(PROCESSES)
    ]
    for process in processes:
        process.start()
    lines = [said.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(30)
    return lines


@pytest.mark.parametrize("rounds", [8])
def test_eight_first_uses_of_a_fresh_postgresql_schema(
    postgres: PostgreSQLServer, rounds: int
) -> None:
    for _ in range(rounds):
        schema = f"race_{secrets.token_hex(4)}"
        postgres.sql(f"CREATE SCHEMA {schema}")
        said = _race(f"{postgres.url}?schema={schema}")
        assert all(line.startswith("ok ") for line in said), said


def test_eight_first_uses_of_a_fresh_mysql_database(mariadb: MariaDBServer) -> None:
    database = f"race_{secrets.token_hex(4)}"
    mariadb.sql(f"CREATE DATABASE {database}")
    said = _race(mariadb.url.rsplit("/", 1)[0] + f"/{database}")
    assert all(line.startswith("ok ") for line in said), said
