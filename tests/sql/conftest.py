"""One PostgreSQL and one MariaDB server per test session (per xdist worker), shared by
the SQL test modules; a test that kills or restarts a server starts its own."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from fencelock.testing import MariaDBServer, PostgreSQLServer, ServerPool


@pytest.fixture(scope="session")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerPool]:
    with ServerPool(tmp_path_factory.mktemp) as servers:
        yield servers


@pytest.fixture(scope="session")
def postgres(pool: ServerPool) -> PostgreSQLServer:
    return pool.postgresql()


@pytest.fixture(scope="session")
def mariadb(pool: ServerPool) -> MariaDBServer:
    return pool.mariadb()


@pytest.fixture
def name() -> str:
    return f"t{secrets.token_hex(4)}/lock"
