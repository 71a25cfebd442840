"""fencelock.integrations.sqlalchemy with the API SQLAlchemy 1.4 has (``declarative_base``,
``Column``; on 1.4, the legacy ``Connection`` that commits each statement unless a
transaction was begun, and ``future=True`` engines and sessions), on PostgreSQL
(psycopg2, the driver 1.4 has for it; on 2.x psycopg 3 when psycopg2 is not installed),
MariaDB (PyMySQL) and SQLite.

The suite runs it on the SQLAlchemy it installs (2.x); scripts/python-matrix.sh runs it
on the newest 1.4 as well.
"""

from __future__ import annotations

import importlib.util
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session, declarative_base

from fencelock.errors import ConfigError, RowNotFound, StaleToken
from fencelock.integrations.sqlalchemy import fence, fence_table, fenced_update

ONE = sa.__version__.startswith("1.")
Schema = tuple[sa.Table, sa.Table, type]  # the fences, the payments, the mapped Payment
FUTURES = (False, True) if ONE else (True,)  # 2.x has only the future API


@pytest.fixture(scope="module", params=["postgresql", "mariadb", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    if request.param == "postgresql":
        driver = "psycopg2" if ONE or importlib.util.find_spec("psycopg2") else "psycopg"
        pytest.importorskip(driver)
        server_url: str = request.getfixturevalue("postgres").url
        return server_url.replace("postgresql://", f"postgresql+{driver}://", 1)
    if request.param == "mariadb":
        server_url = request.getfixturevalue("mariadb").url
        return server_url.replace("mysql://", "mysql+pymysql://", 1)
    return f"sqlite:///{tmp_path_factory.mktemp('sqlite14') / 'app.db'}"


@pytest.fixture(params=FUTURES, ids=lambda future: "future" if future else "legacy")
def engine(url: str, request: pytest.FixtureRequest) -> Iterator[sa.engine.Engine]:
    options = {"future": request.param} if ONE else {}
    made = sa.create_engine(url, **options)
    yield made
    made.dispose()


@pytest.fixture
def schema(engine: sa.engine.Engine) -> Iterator[Schema]:
    """A fence table and a payments table (mapped), of new names."""
    base = declarative_base()
    fences = fence_table(base.metadata, f"fences_{secrets.token_hex(3)}")

    class Payment(base):  # type: ignore[valid-type,misc]
        __tablename__ = f"payments_{secrets.token_hex(3)}"
        id = sa.Column(sa.Integer, primary_key=True)
        amount = sa.Column(sa.Integer, nullable=False)
        fence_token = sa.Column(sa.BigInteger)

    base.metadata.create_all(engine)
    yield fences, Payment.__table__, Payment
    base.metadata.drop_all(engine)


def session(engine: sa.engine.Engine) -> Session:
    return Session(engine, future=True) if ONE else Session(engine)


def test_fence_in_an_orm_session(engine: sa.engine.Engine, schema: Schema) -> None:
    fences, payments, Payment = schema
    with session(engine) as orm, orm.begin():
        fence(orm, "k", 5, table=fences)
        orm.add(Payment(id=1, amount=1))

    def stale_holder_writes() -> None:
        with session(engine) as orm, orm.begin():
            orm.add(Payment(id=2, amount=2))
            orm.flush()
            fence(orm, "k", 4, table=fences)

    with pytest.raises(StaleToken) as caught:
        stale_holder_writes()
    assert (caught.value.key, caught.value.token, caught.value.last) == ("k", 4, 5)
    with session(engine) as orm, orm.begin():
        with pytest.raises(StaleToken):
            fence(orm, "k", 5, table=fences)
        fence(orm, "k", 5, table=fences, allow_equal=True)
    with engine.connect() as conn:
        assert [tuple(row) for row in conn.execute(sa.select(payments))] == [(1, 1, None)]
        assert conn.execute(sa.select(fences.c.token)).scalar() == 5


def test_fenced_update(engine: sa.engine.Engine, schema: Schema) -> None:
    _, payments, Payment = schema
    with session(engine) as orm, orm.begin():
        orm.add(Payment(id=1, amount=1))
    with session(engine) as orm, orm.begin():
        fenced_update(orm, Payment, {"id": 1}, {"amount": 10}, 7)
        with pytest.raises(StaleToken):
            fenced_update(orm, payments, {"id": 1}, {"amount": 11}, 6)
        with pytest.raises(RowNotFound):
            fenced_update(orm, payments, {"id": 9}, {"amount": 11}, 8)
    with engine.connect() as conn:
        assert [tuple(row) for row in conn.execute(sa.select(payments))] == [(1, 10, 7)]


def test_on_a_connection_in_a_transaction(engine: sa.engine.Engine, schema: Schema) -> None:
    fences, _, _ = schema
    with engine.connect() as conn:
        with conn.begin():
            fence(conn, "c", 3, table=fences)
        with pytest.raises(StaleToken), conn.begin():
            fence(conn, "c", 2, table=fences)
    with engine.connect() as conn:
        assert conn.execute(sa.select(fences.c.token)).scalar() == 3


def test_a_legacy_connection_outside_a_transaction_is_refused(
    engine: sa.engine.Engine, schema: Schema, tmp_path: Path
) -> None:
    """1.4's legacy Connection would commit the check on its own, before the write."""
    fences, _, _ = schema
    with engine.connect() as conn:
        if isinstance(conn, sa.future.Connection):
            fence(conn, "l", 1, table=fences)  # begins the transaction, as 2.x does
            conn.rollback()
        else:
            with pytest.raises(ConfigError, match="inside its transaction"):
                fence(conn, "l", 1, table=fences)
    with engine.connect() as conn:
        assert conn.execute(sa.select(fences.c.token)).scalar() is None
