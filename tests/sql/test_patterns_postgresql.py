"""fencelock.sql on PostgreSQL only: what the shared tests (test_patterns.py) cannot say
for both databases."""

from __future__ import annotations

import secrets

import pytest

from fencelock.errors import ConfigError
from fencelock.sql import fence_column_ddl
from fencelock.testing import PostgreSQLServer
from tests.sql.databases import PostgreSQL


@pytest.fixture(scope="module")
def db(postgres: PostgreSQLServer) -> PostgreSQL:
    return PostgreSQL(postgres)


def test_fence_column_ddl_adds_a_nullable_bigint_once(db: PostgreSQL) -> None:
    """``IF NOT EXISTS``: the second run changes nothing."""
    name = f"T_{secrets.token_hex(4)}"  # quoted: the capital stays
    db.sql(f'CREATE TABLE "{name}" (id int PRIMARY KEY)')
    ddl = fence_column_ddl(name)
    assert ddl == f'ALTER TABLE "{name}" ADD COLUMN IF NOT EXISTS "fence_token" bigint'
    assert fence_column_ddl(name, dialect="postgresql") == ddl
    db.sql(ddl)
    db.sql(ddl)
    assert db.sql(
        "SELECT data_type, is_nullable FROM information_schema.columns"
        " WHERE table_name = %s AND column_name = 'fence_token'",
        (name,),
    ) == [("bigint", "YES")]
    assert fence_column_ddl(("public", name), "f") == (
        f'ALTER TABLE "public"."{name}" ADD COLUMN IF NOT EXISTS "f" bigint'
    )
    with pytest.raises(ConfigError, match="dialect"):
        fence_column_ddl(name, dialect="oracle")  # type: ignore[arg-type]
