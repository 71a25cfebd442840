"""One PostgreSQL and one MariaDB server per test session (per xdist worker), shared by
the SQL test modules; a test that kills or restarts a server starts its own.

The fencelock.sql tests take ``db``: each database in turn (:mod:`.databases`), unless
their module is about one and says which; ``table`` and ``holder`` are built on it.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from fencelock.testing import MariaDBServer, PostgreSQLServer, ServerPool
from tests.sql.databases import DATABASES, Database, Holder


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


@pytest.fixture(scope="module", params=list(DATABASES))
def db(request: pytest.FixtureRequest) -> Database:
    """Each database in turn, on the session's server."""
    database = DATABASES[request.param]
    return database(request.getfixturevalue(database.server_fixture))


@pytest.fixture
def table(db: Database) -> str:
    """A new table: rows 1 and 2, a counter, a buyer, a version and a fence column."""
    name = f"t_{secrets.token_hex(4)}"
    db.sql(
        f"CREATE TABLE {name} (id int PRIMARY KEY, n int NOT NULL DEFAULT 0, buyer text,"
        " version int NOT NULL DEFAULT 0, fence_token bigint)"
    )
    db.sql(f"INSERT INTO {name} (id) VALUES (1), (2)")
    return name


@pytest.fixture
def holder(db: Database, table: str) -> Iterator[Holder]:
    """Another transaction, holding row 1 of ``table`` locked until released."""
    held = Holder(db, table)
    yield held
    held.release()
