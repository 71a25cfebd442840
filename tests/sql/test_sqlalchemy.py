"""fencelock.integrations.sqlalchemy against a real PostgreSQL (psycopg 3), MariaDB
(PyMySQL) and SQLite (a file), each test on the three: the fence table checked in an ORM
session and on a Core connection, the fenced update, the metrics, two processes racing
on one name with one of them frozen (SIGSTOP) past its lease, and
docs/integrations/sqlalchemy.md run.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from fencelock import metrics
from fencelock.errors import ConfigError, RowNotFound, StaleToken
from fencelock.integrations.sqlalchemy import (
    afence,
    afenced_update,
    fence,
    fence_table,
    fenced_update,
)

DATABASES = ("postgresql", "mariadb", "sqlite")
WAIT = 60.0  # every wait in the race: generous, the machine is shared


def sqlalchemy_url(request: pytest.FixtureRequest, database: str, tmp: Path) -> str:
    """The database's URL as SQLAlchemy takes it, with the driver the suite installs."""
    if database == "postgresql":
        url: str = request.getfixturevalue("postgres").url
        return url.replace("postgresql://", "postgresql+psycopg://", 1)
    if database == "mariadb":
        url = request.getfixturevalue("mariadb").url
        return url.replace("mysql://", "mysql+pymysql://", 1)
    return f"sqlite:///{tmp / 'app.db'}"


@pytest.fixture(scope="module", params=DATABASES)
def url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    return sqlalchemy_url(request, request.param, tmp_path_factory.mktemp("sqlite"))


@pytest.fixture(scope="module")
def engine(url: str) -> Iterator[sa.Engine]:
    made = sa.create_engine(url)
    yield made
    made.dispose()


class Base(DeclarativeBase):
    pass


class Payment(Base):
    """What the ORM tests write beside the fence: a row that must not outlive a refusal."""

    __tablename__ = f"payments_{secrets.token_hex(3)}"
    id: Mapped[int] = mapped_column(primary_key=True)
    order_id: Mapped[str] = mapped_column(sa.String(64))
    amount: Mapped[int]
    fence_token: Mapped[int | None] = mapped_column(sa.BigInteger)


@pytest.fixture
def tables(engine: sa.Engine) -> Iterator[tuple[sa.Table, sa.Table]]:
    """A fence table of its own (a new name) and the payments table, made afresh."""
    metadata = sa.MetaData()
    fences = fence_table(metadata, f"fences_{secrets.token_hex(4)}")
    payments = Payment.__table__
    assert isinstance(payments, sa.Table)
    metadata.create_all(engine)
    Base.metadata.create_all(engine)
    yield fences, payments
    metadata.drop_all(engine)
    Base.metadata.drop_all(engine)


def stored(engine: sa.Engine, fences: sa.Table, key: str) -> int | None:
    with engine.connect() as conn:
        return conn.execute(sa.select(fences.c.token).where(fences.c.key == key)).scalar()


def payments(engine: sa.Engine) -> list[tuple[str, int]]:
    with Session(engine) as session:
        rows = session.scalars(sa.select(Payment).order_by(Payment.id))
        return [(row.order_id, row.amount) for row in rows]


def rejections() -> int:
    """Fencing rejections this process has counted, every prefix together."""
    return sum(m.fencing_rejections for m in metrics.snapshot().values())


# --- fence() ------------------------------------------------------------------------


def test_a_new_name_then_newer_tokens_are_accepted(
    engine: sa.Engine, tables: tuple[sa.Table, sa.Table]
) -> None:
    fences, _ = tables
    for token in (3, 4, 90):
        with Session(engine) as session, session.begin():
            fence(session, "orders/1", token, table=fences)
        assert stored(engine, fences, "orders/1") == token
    assert stored(engine, fences, "orders/2") is None


def test_a_stale_token_rolls_back_the_whole_orm_transaction(
    engine: sa.Engine, tables: tuple[sa.Table, sa.Table]
) -> None:
    """A holder overtaken by token 8 writes with token 7: the payment it added in the
    same session never lands, the fence keeps 8, and the rejection is counted."""
    fences, _ = tables
    with Session(engine) as session, session.begin():
        fence(session, "orders/7", 8, table=fences)
        session.add(Payment(order_id="orders/7", amount=100))
    before = rejections()

    def stale_holder_writes() -> None:
        with Session(engine) as session, session.begin():
            session.add(Payment(order_id="orders/7", amount=999))
            session.flush()  # the stale write is in the transaction already
            fence(session, "orders/7", 7, table=fences)

    with pytest.raises(StaleToken) as caught:
        stale_holder_writes()
    assert (caught.value.key, caught.value.token, caught.value.last) == ("orders/7", 7, 8)
    assert rejections() == before + 1
    assert metrics.snapshot()["orders"].fencing_rejections >= 1  # counted by the name's prefix
    assert payments(engine) == [("orders/7", 100)]
    assert stored(engine, fences, "orders/7") == 8


def test_an_equal_token_is_refused_unless_allowed(
    engine: sa.Engine, tables: tuple[sa.Table, sa.Table]
) -> None:
    fences, _ = tables
    with Session(engine) as session, session.begin():
        fence(session, "orders/e", 5, table=fences)
    with Session(engine) as session, session.begin():
        with pytest.raises(StaleToken) as caught:
            fence(session, "orders/e", 5, table=fences)
        assert caught.value.last == 5
        fence(session, "orders/e", 5, table=fences, allow_equal=True)  # the same lease again
        fence(session, "orders/e", 5, table=fences.name, allow_equal=True)  # by its name
    assert stored(engine, fences, "orders/e") == 5


def test_on_a_core_connection_in_its_transaction(
    engine: sa.Engine, tables: tuple[sa.Table, sa.Table]
) -> None:
    fences, payments_table = tables
    with engine.begin() as conn:
        fence(conn, "orders/c", 10, table=fences)
        conn.execute(payments_table.insert().values(order_id="orders/c", amount=1))

    def stale_holder_writes() -> None:
        with engine.begin() as conn:
            conn.execute(payments_table.insert().values(order_id="orders/c", amount=2))
            fence(conn, "orders/c", 9, table=fences)

    with pytest.raises(StaleToken):
        stale_holder_writes()
    assert payments(engine) == [("orders/c", 1)]
    with engine.connect() as conn:  # 2.0-style: the statement begins the transaction
        fence(conn, "orders/c", 11, table=fences)
        conn.rollback()
    assert stored(engine, fences, "orders/c") == 10


def test_fences_of_two_names_are_independent(
    engine: sa.Engine, tables: tuple[sa.Table, sa.Table]
) -> None:
    fences, _ = tables
    with Session(engine) as session, session.begin():
        fence(session, "a", 100, table=fences)
        fence(session, "b", 1, table=fences)
    assert (stored(engine, fences, "a"), stored(engine, fences, "b")) == (100, 1)


def test_what_is_not_a_session_or_a_token_is_a_config_error(
    engine: sa.Engine, tables: tuple[sa.Table, sa.Table]
) -> None:
    fences, _ = tables
    with pytest.raises(ConfigError):
        fence(object(), "orders/x", 1, table=fences)  # type: ignore[arg-type]
    with Session(engine) as session, session.begin():
        with pytest.raises(ConfigError):
            fence(session, "orders/x", "1", table=fences)  # type: ignore[arg-type]
        with pytest.raises(ConfigError):
            fence(session, "", 1, table=fences)


# --- fenced_update() --------------------------------------------------------------


def test_fenced_update_accepts_newer_refuses_stale_and_finds_no_row(
    engine: sa.Engine, tables: tuple[sa.Table, sa.Table]
) -> None:
    _, payments_table = tables
    with Session(engine) as session, session.begin():
        session.add(Payment(id=1, order_id="o1", amount=5))
    with Session(engine) as session, session.begin():
        fenced_update(session, Payment, {"id": 1}, {"amount": 6}, 20)  # a mapped class
    before = rejections()

    def stale_holder_updates() -> None:
        with Session(engine) as session, session.begin():
            session.add(Payment(id=2, order_id="o2", amount=1))
            fenced_update(session, payments_table, {"id": 1}, {"amount": 7}, 19)  # a Table

    with pytest.raises(StaleToken) as caught:
        stale_holder_updates()
    assert (caught.value.token, caught.value.last) == (19, 20)
    assert rejections() == before + 1
    with pytest.raises(RowNotFound), engine.begin() as conn:
        fenced_update(conn, payments_table, {"id": 3}, {"amount": 8}, 30)
    with engine.begin() as conn:
        with pytest.raises(StaleToken):
            fenced_update(conn, payments_table, {"id": 1}, {"amount": 8}, 20)
        fenced_update(conn, payments_table, {"id": 1}, {"amount": 8}, 20, allow_equal=True)
        fenced_update(conn, payments_table, {"id": 1}, {"amount": 9}, 21)
    with engine.connect() as conn:
        row = conn.execute(sa.select(payments_table).order_by(payments_table.c.id)).all()
    assert [tuple(r) for r in row] == [(1, "o1", 9, 21)]  # o2 rolled back with the refusal


def test_fenced_update_sees_the_sessions_pending_changes(
    engine: sa.Engine, tables: tuple[sa.Table, sa.Table]
) -> None:
    """The session is flushed first: a payment added in it can be fenced at once."""
    with Session(engine) as session, session.begin():
        session.add(Payment(id=5, order_id="o5", amount=1))
        fenced_update(session, Payment, {"id": 5}, {"amount": 2}, 1)
    assert payments(engine) == [("o5", 2)]


# --- asyncio ------------------------------------------------------------------------


def test_the_asyncio_twins(url: str, tables: tuple[sa.Table, sa.Table]) -> None:
    import asyncio

    from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

    fences, payments_table = tables
    async_url = re.sub(r"^sqlite://", "sqlite+aiosqlite://", url)
    async_url = async_url.replace("+psycopg://", "+psycopg_async://")
    async_url = async_url.replace("+pymysql://", "+aiomysql://")
    if async_url.startswith("sqlite+aiosqlite"):
        pytest.importorskip("aiosqlite")

    async def main() -> None:
        engine = create_async_engine(async_url)
        try:
            async with AsyncSession(engine) as session, session.begin():
                await afence(session, "orders/a", 2, table=fences)
                session.add(Payment(id=9, order_id="orders/a", amount=1))
            with pytest.raises(StaleToken):
                async with engine.begin() as conn:
                    await afence(conn, "orders/a", 1, table=fences)
            async with AsyncSession(engine) as session, session.begin():
                await afenced_update(session, Payment, {"id": 9}, {"amount": 3}, 2)
                with pytest.raises(StaleToken):
                    await afenced_update(session, payments_table, {"id": 9}, {"amount": 4}, 1)
        finally:
            await engine.dispose()

    asyncio.run(main())
    assert payments(sa.create_engine(url)) == [("orders/a", 3)]


# --- two processes, one frozen past its lease -------------------------------------------


def _writer(
    url: str,
    locks: str,
    fences_name: str,
    ledger_name: str,
    ttl: float,
    report: Any,
    proceed: Any,
) -> None:
    """Take the lock, report the token, wait for ``proceed``, then write the ledger row
    through ``fence()`` in one transaction; report what happened."""
    import fencelock

    engine = sa.create_engine(url)
    metadata = sa.MetaData()
    fences = fence_table(metadata, fences_name)
    ledger = sa.Table(ledger_name, metadata, autoload_with=engine)
    with fencelock.connect(locks) as client:
        try:
            with client.lock("race/1", ttl=ttl, timeout=WAIT) as lease:
                report.send(("holding", os.getpid(), lease.token))
                proceed.wait(WAIT)
                try:
                    with Session(engine) as session, session.begin():
                        session.execute(ledger.insert().values(token=lease.token))
                        fence(session, "race/1", lease.token, table=fences)
                except StaleToken as stale:
                    report.send(("stale", os.getpid(), stale.last))
                else:
                    report.send(("wrote", os.getpid(), lease.token))
        except fencelock.LeaseLost:
            pass  # the frozen holder's lease ran out: its release says so
    engine.dispose()


def receive(reports: Any) -> tuple[str, int, int]:
    """The next report from one writer: (what, its pid, a token)."""
    assert reports.poll(WAIT), "no report from the writer"
    report: tuple[str, int, int] = reports.recv()
    return report


def test_two_processes_race_one_frozen_past_its_lease(
    engine: sa.Engine, url: str, tables: tuple[sa.Table, sa.Table], tmp_path: Path
) -> None:
    """As ``fencelock check``'s pause nemesis does: the first holder is frozen (SIGSTOP)
    just before its write, until the second has taken the lock after the first's lease
    ran out and written; thawed (SIGCONT), the first writes with its old token. No write
    is lost, the stale one is refused, the fence ends at the highest token issued."""
    fences, _ = tables
    ledger = sa.Table(
        f"ledger_{secrets.token_hex(4)}",
        sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("token", sa.BigInteger, nullable=False),
    )
    ledger.create(engine)
    spawn = multiprocessing.get_context("spawn")
    # a pipe each: a Queue's writers share a lock, which a process frozen while its
    # feeder thread holds it would keep from the other
    first_reports, first_end = spawn.Pipe(duplex=False)
    second_reports, second_end = spawn.Pipe(duplex=False)
    locks = f"sqlite:///{tmp_path / 'locks.db'}"
    ttl = 2.0
    go_first, go_second = spawn.Event(), spawn.Event()
    first = spawn.Process(
        target=_writer, args=(url, locks, fences.name, ledger.name, ttl, first_end, go_first)
    )
    second = spawn.Process(
        target=_writer, args=(url, locks, fences.name, ledger.name, ttl, second_end, go_second)
    )
    try:
        first.start()
        state, pid, first_token = receive(first_reports)
        assert (state, pid) == ("holding", first.pid)
        assert first.pid is not None
        os.kill(first.pid, signal.SIGSTOP)  # frozen holding the lease, before its write
        second.start()  # waits for the lock: it is free once the frozen lease runs out
        state, pid, second_token = receive(second_reports)
        assert (state, pid) == ("holding", second.pid)
        assert second_token > first_token
        go_second.set()
        assert receive(second_reports) == ("wrote", second.pid, second_token)
        os.kill(first.pid, signal.SIGCONT)  # the stale holder wakes and writes
        go_first.set()  # (an Event set while a waiter is stopped waits for it to wake)
        assert receive(first_reports) == ("stale", first.pid, second_token)
        first.join(WAIT)
        second.join(WAIT)
        assert (first.exitcode, second.exitcode) == (0, 0)
    finally:
        for process in (first, second):
            if process.pid is not None and process.is_alive():
                os.kill(process.pid, signal.SIGCONT)
                process.kill()
    with engine.connect() as conn:
        written = conn.execute(sa.select(ledger.c.token).order_by(ledger.c.id)).scalars().all()
    assert written == [second_token]  # the accepted write landed, the stale one did not
    assert stored(engine, fences, "race/1") == second_token  # the highest token issued
    ledger.drop(engine)


# --- docs/integrations/sqlalchemy.md ---------------------------------------------------

PAGE = Path(__file__).resolve().parents[2] / "docs" / "integrations" / "sqlalchemy.md"
SNIPPET = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
MIGRATION = "from alembic import op"


def page_snippets() -> list[str]:
    return SNIPPET.findall(PAGE.read_text())


def test_the_page_shows_the_table_the_migration_and_both_forms() -> None:
    text = "\n".join(page_snippets())
    for shown in ("fence_table(", MIGRATION, "fence(session", "fenced_update(", "StaleToken"):
        assert shown in text, shown


def run_program(url: str, engine: sa.Engine, program: str, tmp_path: Path) -> None:
    """``program`` in a new interpreter on ``DATABASE_URL`` (its tables dropped first),
    the locks on a fresh SQLite file; it must exit 0."""
    with engine.begin() as conn:
        for name in [*re.findall(r'__tablename__ = "(\w+)"', program), "fencelock_fences"]:
            conn.execute(sa.text(f"DROP TABLE IF EXISTS {name}"))
    env = dict(os.environ, DATABASE_URL=url, FENCELOCK_URL=f"sqlite:///{tmp_path / 'locks.db'}")
    done = subprocess.run(
        [sys.executable, "-c", program],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr


def test_the_page_runs(url: str, engine: sa.Engine, tmp_path: Path) -> None:
    """The page's snippets in order, as one program; the migration is run by the next
    test."""
    program = "\n".join(code for code in page_snippets() if MIGRATION not in code)
    run_program(url, engine, program, tmp_path)


def test_the_fencing_pages_orm_section_runs(url: str, engine: sa.Engine, tmp_path: Path) -> None:
    """docs/fencing.md leads with the ORM form: its snippet runs as it is."""
    text = (PAGE.parents[1] / "fencing.md").read_text()
    section = text[text.index("## In an ORM transaction") : text.index("## The guards")]
    (program,) = SNIPPET.findall(section)
    run_program(url, engine, program, tmp_path)


def test_the_pages_migration_makes_the_fence_table(engine: sa.Engine) -> None:
    """The page's Alembic migration, run by Alembic's operations on the database, makes
    the table fence_table() describes; its downgrade drops it."""
    from alembic.migration import MigrationContext
    from alembic.operations import Operations

    (migration,) = [code for code in page_snippets() if MIGRATION in code]
    with engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE IF EXISTS fencelock_fences"))
    namespace: dict[str, Any] = {}
    exec(compile(migration, "sqlalchemy.md migration", "exec"), namespace)  # noqa: S102 - the page's own code
    with engine.begin() as conn, Operations.context(MigrationContext.configure(conn)):
        namespace["upgrade"]()
    made = {c["name"]: c for c in sa.inspect(engine).get_columns("fencelock_fences")}
    expected = fence_table(sa.MetaData()).columns
    assert set(made) == {c.name for c in expected}
    assert [made[c.name]["nullable"] for c in expected] == [False, False]
    assert sa.inspect(engine).get_pk_constraint("fencelock_fences")["constrained_columns"] == [
        "key"
    ]
    with Session(engine) as session, session.begin():
        fence(session, "orders/m", 1)
    with engine.begin() as conn, Operations.context(MigrationContext.configure(conn)):
        namespace["downgrade"]()
    assert not sa.inspect(engine).has_table("fencelock_fences")


def test_two_holders_fencing_a_new_name_at_once(
    engine: sa.Engine, tables: tuple[sa.Table, sa.Table]
) -> None:
    """Two transactions, both begun, fence a name never seen before at once: the older
    token is refused, or lands first and is overtaken; never an error of the database's
    (on MySQL, a deadlock between two gap locks), and the fence ends at the newer token."""
    import threading

    fences, _ = tables
    for round_ in range(5):
        name = f"fresh/{round_}"
        outcomes: dict[int, str] = {}
        both = threading.Barrier(2, timeout=WAIT)

        def holder(
            token: int,
            name: str = name,
            outcomes: dict[int, str] = outcomes,
            both: threading.Barrier = both,
        ) -> None:
            try:
                with Session(engine) as session, session.begin():
                    session.connection()  # the transaction has begun
                    both.wait()
                    fence(session, name, token, table=fences)
                outcomes[token] = "accepted"
            except StaleToken:
                outcomes[token] = "stale"
            except Exception as error:  # what must not happen: the database's error
                outcomes[token] = f"error: {error!r}"

        threads = [threading.Thread(target=holder, args=(token,)) for token in (1, 2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(WAIT)
        assert outcomes[2] == "accepted", outcomes
        assert outcomes[1] in ("accepted", "stale"), outcomes
        assert stored(engine, fences, name) == 2


def test_names_with_colons_quotes_and_percents(engine: sa.Engine) -> None:
    """Table and column names reach the SQL as quoted identifiers, whatever they hold:
    a ``:`` is no bind parameter to ``text()``, a ``%`` none to the driver."""
    metadata = sa.MetaData()
    odd = sa.Table(
        f"o:d%d'{secrets.token_hex(2)}",
        metadata,
        sa.Column("k:1", sa.Integer, primary_key=True),
        sa.Column('v%(x)s"', sa.String(8)),
        sa.Column("fence:token", sa.BigInteger),
    )
    fences = fence_table(metadata, f"f:%s{secrets.token_hex(2)}")
    metadata.create_all(engine)
    try:
        with engine.begin() as conn:
            conn.execute(odd.insert().values({"k:1": 1}))
            fence(conn, "odd:%(key)s", 2, table=fences)
            fenced_update(conn, odd, {"k:1": 1}, {'v%(x)s"': ":v0"}, 2, fence_column="fence:token")
            with pytest.raises(StaleToken):
                fence(conn, "odd:%(key)s", 1, table=fences)
            with pytest.raises(StaleToken):
                fenced_update(
                    conn, odd, {"k:1": 1}, {'v%(x)s"': "x"}, 1, fence_column="fence:token"
                )
        with engine.connect() as conn:
            assert tuple(conn.execute(sa.select(odd)).one()) == (1, ":v0", 2)
            assert stored(engine, fences, "odd:%(key)s") == 2
    finally:
        metadata.drop_all(engine)
