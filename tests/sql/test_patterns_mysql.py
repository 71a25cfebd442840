"""fencelock.sql against a real MariaDB 10.11, through PyMySQL and aiomysql.

The tests that read the same for every database are written once, in test_patterns.py,
against its ``db`` fixture; they are collected here again, where ``db`` is
:class:`MariaDB`. Below them, what only MySQL does: a lock timeout that is the
session's, transactions told by the server status flags, row counts of rows changed,
savepoints lost to a deadlock, backtick quoting, and the page's MySQL examples.
"""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiomysql
import pymysql
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pymysql.constants import CLIENT

from fencelock.errors import ConfigError, ConflictError, LockTimeout, StaleToken
from fencelock.sql import (
    TransactionLost,
    aoptimistic_update,
    fence_column_ddl,
    fenced_write,
    for_update,
    optimistic_update,
)
from fencelock.sql.mysql import MYSQL
from fencelock.sql.statement import Statement
from fencelock.testing import MariaDBServer

# The shared tests and the fixtures they take besides `db`: pytest collects them in this
# module, so they get its `db`, MariaDB's.
from tests.sql.test_patterns import (  # noqa: F401
    Holder,
    examples,
    fenced,
    holder_fixture,
    name_text,
    placeholders,
    row,
    schema,
    table_fixture,
    test_a_change_to_the_key_is_followed,
    test_a_connection_of_the_wrong_colour_is_refused,
    test_a_key_that_matches_several_rows_is_refused,
    test_a_lock_timeout_raises_after_about_the_timeout,
    test_a_missing_row_and_a_bad_change_are_named,
    test_a_null_version_counts_as_zero,
    test_a_rejected_write_rolls_back_with_the_write_it_protects,
    test_a_stale_write_is_judged_by_the_latest_fence_not_an_older_read,
    test_a_stale_writer_waits_for_the_newer_one_then_is_rejected,
    test_an_absent_row_yields_none_and_bad_arguments_are_refused,
    test_an_equal_token_may_write_again_even_with_nothing_to_change,
    test_an_error_in_changes_propagates_and_nothing_is_written,
    test_async_conflict_and_missing_row,
    test_async_fenced_write,
    test_async_inside_the_callers_transaction_it_rolls_back_with_it,
    test_async_row_locks,
    test_async_writers_all_land_and_some_retry,
    test_eight_concurrent_writers_all_land_and_some_retry,
    test_gives_up_after_the_last_attempt_and_reports_the_retries,
    test_inside_the_callers_transaction_it_rolls_back_with_it,
    test_nowait_raises_lock_timeout_while_another_transaction_holds_the_row,
    test_skip_locked_yields_none_for_a_held_row_and_another_free_one,
    test_the_fence_rejects_lower_and_equal_tokens_and_accepts_higher,
    test_the_result_is_the_row_written,
    test_the_upsert_inserts_a_missing_row_then_fences_it,
    test_waiting_for_the_lock_sees_the_holders_write,
    values,
)

EXAMPLES = examples("mysql")
SCHEMA = schema("mysql")
LOCK_WAIT_TIMEOUT = 1205  # MariaDB's answer to NOWAIT as well as to a timeout
DUPLICATE_COLUMN = 1060
DEADLOCK = 1213
RECORD_CHANGED = 1020


def code(error: BaseException | None) -> int | None:
    """The server's error number in a PyMySQL error."""
    return error.args[0] if isinstance(error, pymysql.err.MySQLError) else None


class MariaDB:
    """MariaDB through PyMySQL and aiomysql."""

    def __init__(self, server: MariaDBServer) -> None:
        self.server = server
        url = urlsplit(server.url)
        self.options: dict[str, Any] = {
            "host": url.hostname,
            "port": url.port,
            "user": url.username,
            "password": url.password,
        }
        self.database = url.path.lstrip("/")

    def sql(self, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
        return self.server.sql(statement, params)

    def connect(self, **options: Any) -> pymysql.connections.Connection[Any]:
        return pymysql.connect(
            **self.options, database=self.database, **{"autocommit": True, **options}
        )

    @contextmanager
    def transaction(self, conn: pymysql.connections.Connection[Any]) -> Iterator[None]:
        conn.begin()
        try:
            yield
        except BaseException:
            conn.rollback()
            raise
        conn.commit()

    def query(
        self, conn: pymysql.connections.Connection[Any], statement: str, params: Any = None
    ) -> list[tuple[Any, ...]]:
        with conn.cursor() as cursor:
            cursor.execute(statement, params)
            return list(cursor.fetchall()) if cursor.description else []

    def not_granted(self, error: BaseException) -> bool:
        return code(error) == LOCK_WAIT_TIMEOUT

    async def aconnect(self, **options: Any) -> Any:
        return await aiomysql.connect(
            **self.options, db=self.database, **{"autocommit": True, **options}
        )

    @asynccontextmanager
    async def atransaction(self, conn: Any) -> AsyncIterator[None]:
        await conn.begin()
        try:
            yield
        except BaseException:
            await conn.rollback()
            raise
        await conn.commit()

    async def aquery(self, conn: Any, statement: str, params: Any = None) -> None:
        async with conn.cursor() as cursor:
            await cursor.execute(statement, params)

    async def aclose(self, conn: Any) -> None:
        await conn.ensure_closed()


@pytest.fixture(scope="module")
def server(mariadb: MariaDBServer) -> MariaDBServer:
    return mariadb  # the session's (tests/sql/conftest.py)


@pytest.fixture(scope="module")
def db(server: MariaDBServer) -> MariaDB:
    return MariaDB(server)


def lock_wait_timeout(db: MariaDB, conn: pymysql.connections.Connection[Any]) -> int:
    (setting,) = db.query(conn, "SELECT @@SESSION.innodb_lock_wait_timeout")[0]
    return int(setting)


# --- row locks: the session's lock timeout, transactions by the status flags -----


def test_the_lock_timeout_is_put_back_whether_the_lock_was_granted_or_not(
    db: MariaDB, table: str
) -> None:
    """``innodb_lock_wait_timeout`` is the session's: put back after the SELECT, the
    lock granted or not; a lock not granted rolls back only the SELECT, and the wait is
    rounded up to a whole second."""
    other = Holder(db, table, 2)
    with db.connect() as conn:
        db.query(conn, "SET SESSION innodb_lock_wait_timeout = 7")
        with db.transaction(conn):
            with for_update(conn, table, {"id": 1}, timeout=1) as locked:
                assert locked is not None
                assert lock_wait_timeout(db, conn) == 7
            db.query(conn, f"UPDATE {table} SET n = 5 WHERE id = 1")
            started = time.monotonic()
            with (
                pytest.raises(LockTimeout, match=r"0\.2s"),
                for_update(conn, table, {"id": 2}, timeout=0.2),
            ):
                pytest.fail("row 2 is held by another transaction")
            assert 0.9 <= time.monotonic() - started < 30  # 1 s: whole seconds
            assert lock_wait_timeout(db, conn) == 7
        other.release()
    assert row(db, table)[0] == 5  # the transaction went on and committed


def test_a_transaction_is_begin_or_autocommit_off(db: MariaDB, table: str) -> None:
    with db.connect() as conn:
        with (
            pytest.raises(ConfigError, match=r"needs a transaction.*conn\.begin"),
            for_update(conn, table, {"id": 1}),
        ):
            pytest.fail("the lock would have ended already")
        conn.begin()
        with for_update(conn, table, {"id": 1}) as locked:
            assert locked is not None
        conn.commit()
        with (
            pytest.raises(ConfigError, match="needs a transaction"),
            for_update(conn, table, {"id": 1}),
        ):
            pytest.fail("committed: no transaction open any more")
    with db.connect(autocommit=False) as implicit:  # its SELECT opens a transaction
        with for_update(implicit, table, {"id": 1}) as locked:
            assert locked is not None
        with (
            db.connect() as rival,
            pytest.raises(LockTimeout),
            db.transaction(rival),
            for_update(rival, table, {"id": 1}, mode="nowait"),
        ):
            pytest.fail("row 1 is the implicit transaction's")


def test_with_autocommit_off_a_helper_joins_the_open_transaction_or_commits_its_own(
    db: MariaDB, table: str
) -> None:
    """Autocommit off, nothing open: an attempt is a transaction of its own, committed.
    A SELECT opened one (the drivers keep no status from a result set): the attempt is a
    savepoint in it, which keeps the caller's lock and commits with the caller."""
    with db.connect(autocommit=False) as conn:
        optimistic_update(conn, table, {"id": 1}, lambda r: {"n": 1})
        assert row(db, table)[0] == 1  # committed
        db.query(conn, f"SELECT * FROM {table} WHERE id = 2 FOR UPDATE")
        optimistic_update(conn, table, {"id": 1}, lambda r: {"n": 2})
        assert row(db, table)[0] == 1  # not yet: in the caller's transaction
        with (
            db.connect() as rival,
            pytest.raises(LockTimeout),
            db.transaction(rival),
            for_update(rival, table, {"id": 2}, mode="nowait"),
        ):
            pytest.fail("row 2 is still the caller's")
        conn.commit()
    assert row(db, table)[0] == 2


# --- row counts: rows changed, not rows matched --------------------------------


def test_a_connection_counting_rows_matched_is_refused(db: MariaDB, table: str) -> None:
    """With ``CLIENT.FOUND_ROWS`` a refused upsert counts 1, as one that wrote does:
    fencelock.sql refuses such a connection rather than misread it."""
    db.sql(f"UPDATE {table} SET fence_token = 5 WHERE id = 1")
    refused = MYSQL.fenced_upsert(fenced(table, {"id": 1}, {"buyer": "stale"}, token=4))
    with db.connect(client_flag=CLIENT.FOUND_ROWS) as conn:
        with conn.cursor() as cursor:
            assert cursor.execute(str(refused.query), refused.params) == 1
        assert row(db, table)[1:] == (None, 0, 5)  # yet nothing was written
        with pytest.raises(ConfigError, match="FOUND_ROWS"):
            fenced_write(conn, table, {"id": 1}, 4, {"buyer": "stale"}, upsert=True)

    async def main() -> None:
        aconn = await db.aconnect(client_flag=CLIENT.FOUND_ROWS)
        with pytest.raises(ConfigError, match="FOUND_ROWS"):
            await aoptimistic_update(aconn, table, {"id": 1}, lambda r: {})
        await db.aclose(aconn)

    asyncio.run(main())


def test_the_upsert_assigns_the_fence_last(db: MariaDB, table: str) -> None:
    """Every column's ``IF`` meets the old fence: a newer token's upsert changes them all."""
    with db.connect() as conn:
        fenced_write(conn, table, {"id": 1}, 1, {"buyer": "one", "n": 1}, upsert=True)
        fenced_write(conn, table, {"id": 1}, 2, {"buyer": "two", "n": 2}, upsert=True)
    assert row(db, table) == (2, "two", 0, 2)
    upsert = str(MYSQL.fenced_upsert(fenced(table, {"id": 1}, {"n": 0}, token=3)).query)
    assert "VALUES(" not in upsert  # deprecated since MySQL 8.0.20


# --- conflicts: deadlocks and snapshots roll back the whole transaction --------


class Rival:
    """A heavier transaction (more rows written) holding row 1, that will want row 2:
    InnoDB picks the lighter one as a deadlock's victim."""

    def __init__(self, db: MariaDB, table: str) -> None:
        self.db = db
        self.table = table
        self.conn = db.connect()
        db.sql(f"CREATE TABLE {table}_heavy (x int)")
        self.conn.begin()
        with self.conn.cursor() as cursor:
            cursor.executemany(f"INSERT INTO {table}_heavy VALUES (%s)", [(x,) for x in range(200)])
            cursor.execute(f"UPDATE {table} SET n = 20 WHERE id = 1")

    def wait_for_the_victim(self) -> None:
        """Until a transaction waits for a row lock (the victim, for row 1): the order
        the deadlock needs, seen, not slept for."""
        deadline = time.monotonic() + 30
        waiting = "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'"
        while self.db.sql(waiting)[0][0] < 1:
            assert time.monotonic() < deadline, "the victim never waited for row 1"
            time.sleep(0.01)

    def take_row_2(self) -> None:
        """Wait for row 2 (the victim's), closing the cycle; then commit."""
        self.db.query(self.conn, f"UPDATE {self.table} SET n = 21 WHERE id = 2")
        self.conn.commit()
        self.conn.close()


def test_a_deadlock_in_the_callers_transaction_is_transaction_lost(db: MariaDB, table: str) -> None:
    """An optimistic update in the caller's transaction is the deadlock's victim: InnoDB
    rolled the whole transaction back, so TransactionLost, not a retry in no transaction."""
    with db.connect() as victim:
        victim.begin()
        db.query(victim, f"UPDATE {table} SET n = 10 WHERE id = 2")  # the caller's own write
        rival = Rival(db, table)
        errors: list[BaseException] = []

        def update() -> None:
            try:
                optimistic_update(victim, table, {"id": 1}, lambda r: {"n": 99})
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=update)
        thread.start()
        rival.wait_for_the_victim()
        rival.take_row_2()
        thread.join(30)
    assert len(errors) == 1 and isinstance(errors[0], TransactionLost), errors
    assert code(errors[0].__cause__) == DEADLOCK
    assert row(db, table, 1)[0] == 20 and row(db, table, 2)[0] == 21  # the rival's


def test_an_async_deadlock_in_the_callers_transaction_is_transaction_lost(
    db: MariaDB, table: str
) -> None:
    async def main() -> BaseException:
        victim = await db.aconnect()
        await victim.begin()
        await db.aquery(victim, f"UPDATE {table} SET n = 10 WHERE id = 2")
        rival = Rival(db, table)
        update = asyncio.create_task(
            aoptimistic_update(victim, table, {"id": 1}, lambda r: {"n": 99})
        )
        await asyncio.to_thread(rival.wait_for_the_victim)
        await asyncio.to_thread(rival.take_row_2)
        with pytest.raises(TransactionLost) as caught:
            await update
        await db.aclose(victim)
        return caught.value

    lost = asyncio.run(main())
    assert code(lost.__cause__) == DEADLOCK
    assert row(db, table, 1)[0] == 20 and row(db, table, 2)[0] == 21


def test_a_row_changed_since_the_snapshot_is_a_conflict(db: MariaDB, table: str) -> None:
    """MariaDB's ``innodb_snapshot_isolation`` refuses to update a row changed since the
    transaction's snapshot (1020): in a transaction of the helper's own, a conflict to
    retry; in the caller's, the whole transaction is gone."""

    def overtaken(current: dict[str, Any]) -> dict[str, Any]:
        db.sql(f"UPDATE {table} SET version = version + 1 WHERE id = 1")
        return {"n": 1}

    with db.connect() as conn:
        db.query(conn, "SET SESSION innodb_snapshot_isolation = ON")
        with pytest.raises(ConflictError, match="2 attempt"):
            optimistic_update(conn, table, {"id": 1}, overtaken, attempts=2, base_delay=0.001)
        with pytest.raises(TransactionLost) as caught, db.transaction(conn):
            optimistic_update(conn, table, {"id": 1}, overtaken)
        assert code(caught.value.__cause__) == RECORD_CHANGED
    assert row(db, table)[0] == 0


# --- the fence column ----------------------------------------------------------


def test_fence_column_ddl_adds_a_nullable_bigint(db: MariaDB) -> None:
    """Backticks for any name (a backtick doubled, a ``%`` kept: it is run without
    parameters); no IF NOT EXISTS, so the second run fails."""
    name = f"T`{secrets.token_hex(4)}%s"
    db.sql(f"CREATE TABLE {quote(name)} (id int PRIMARY KEY)")
    ddl = fence_column_ddl(name, dialect="mysql")
    assert ddl == f"ALTER TABLE {quote(name)} ADD COLUMN `fence_token` BIGINT NULL"
    db.sql(ddl)
    with pytest.raises(pymysql.err.OperationalError) as caught:
        db.sql(ddl)
    assert code(caught.value) == DUPLICATE_COLUMN
    assert db.sql(
        "SELECT data_type, is_nullable FROM information_schema.columns"
        " WHERE table_name = %s AND column_name = 'fence_token'",
        (name,),
    ) == [("bigint", "YES")]
    assert fence_column_ddl(("fencelock", "payments"), "f", dialect="mysql") == (
        "ALTER TABLE `fencelock`.`payments` ADD COLUMN `f` BIGINT NULL"
    )


# --- the statements, for any name ----------------------------------------------


def statements(
    table: str, key: dict[str, Any], changes: dict[str, Any], other: str
) -> list[tuple[Statement, tuple[str, ...]]]:
    """Every statement the dialect builds, with the names each must quote."""
    names = (table, *key)
    every = (*names, *changes, other)
    return [
        (MYSQL.select(table, key), names),
        (MYSQL.select((other, table), key, columns=[other], lock="skip_locked"), (*names, other)),
        (MYSQL.versioned_update(table, key, changes, other, 3), every),
        (MYSQL.versioned_update(table, key, changes, other, None), every),
        (MYSQL.fenced_update(fenced(table, key, changes, other, upsert=False)), every),
        (MYSQL.fenced_upsert(fenced(table, key, changes, other, allow_equal=True)), every),
        (MYSQL.read_fence(fenced(table, key, {}, other, upsert=False)), (*names, other)),
        (MYSQL.lock_timeout_setting(), ()),
        (MYSQL.set_lock_timeout(0.0001), ()),
        (MYSQL.restore_lock_timeout(50), ()),
    ]


def quote(name: str) -> str:
    """``name`` as a quoted identifier in a statement run without parameters."""
    return "`" + name.replace("`", "``") + "`"


def quoted(name: str) -> str:
    """``name`` as a quoted identifier in a statement with parameters."""
    return quote(name).replace("%", "%%")


@given(
    table=name_text,
    key=st.dictionaries(name_text, values, min_size=1, max_size=3),
    changes=st.dictionaries(name_text, values, max_size=3),
    other=name_text,
)
def test_every_name_is_quoted_and_every_value_is_a_parameter(
    table: str, key: dict[str, Any], changes: dict[str, Any], other: str
) -> None:
    for statement, names in statements(table, key, changes, other):
        assert isinstance(statement.query, str)
        assert placeholders(statement.query) == set(statement.params), statement.query
        for name in names:
            assert quoted(name) in statement.query, (name, statement.query)


def test_the_lock_timeout_is_whole_seconds_at_least_one() -> None:
    seconds = (0, 0.2, 1, 1.2, 59.01, 1e12)
    timeouts = [MYSQL.set_lock_timeout(s).params["setting"] for s in seconds]
    assert timeouts == [1, 1, 1, 2, 60, 100_000_000]  # rounded up, and MariaDB's ceiling


# MySQL's identifiers: the BMP only, 64 characters at most, not ending in white space,
# column names compared without case or accents (so each gets a prefix of its own)
identifier_text = st.text(
    st.characters(max_codepoint=0xFFFF, exclude_characters="\x00", codec="utf-8"),
    min_size=1,
    max_size=12,
).filter(lambda name: not name[-1].isspace())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    names=st.lists(identifier_text, min_size=4, max_size=4),
    key=st.text(st.characters(exclude_characters="\x00", codec="utf-8"), max_size=8),
)
def test_any_names_work_against_the_database(db: MariaDB, names: list[str], key: str) -> None:
    """Tables and columns named anything MySQL takes (backticks, ``%``, ``%(k0)s``,
    spaces, any script) round-trip through every helper."""
    table, id_column, value_column, fence = (f"c{n}{name}" for n, name in enumerate(names))
    table = f"{table}_{secrets.token_hex(3)}"
    with db.connect() as conn:
        db.query(
            conn,
            f"CREATE TABLE {quote(table)} ({quote(id_column)} varchar(64) PRIMARY KEY,"
            f" {quote(value_column)} int, version int, {quote(fence)} bigint)",
        )
        try:
            where = {id_column: key}
            fenced_write(conn, table, where, 1, {value_column: 1}, fence_column=fence, upsert=True)
            with pytest.raises(StaleToken):
                fenced_write(conn, table, where, 1, {value_column: 2}, fence_column=fence)
            result = optimistic_update(
                conn, table, where, lambda r: {value_column: r[value_column] + 1}
            )
            assert result.row[value_column] == 2 and result.version == 1
            with db.transaction(conn), for_update(conn, table, where, timeout=5) as locked:
                assert locked is not None and locked[fence] == 1
        finally:
            db.query(conn, f"DROP TABLE {quote(table)}")


# --- docs/sql-patterns.md, its MySQL section ------------------------------------


def test_the_section_shows_the_helpers_on_both_drivers() -> None:
    text = "\n".join(EXAMPLES)
    for api in ("import pymysql", "import aiomysql", "for_update(", "afor_update(", "lease"):
        assert api in text, api
    for api in ("fenced_write(", 'mode="skip_locked"', "timeout=", 'dialect="mysql"'):
        assert api in text, api
    assert len(SCHEMA) == 1


def run_example(db: MariaDB, code_: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``code_`` in a new interpreter, on the section's schema made afresh."""
    tables = re.findall(r"CREATE TABLE (\w+)", SCHEMA[0])
    db.sql(f"DROP TABLE IF EXISTS {', '.join(tables)}")
    for statement in SCHEMA[0].split(";"):
        if statement.strip():
            db.sql(statement)
    env = dict(
        os.environ, MYSQL_URL=db.server.url, FENCELOCK_URL=f"sqlite:///{tmp_path / 'locks.db'}"
    )
    return subprocess.run(
        [sys.executable, "-c", code_],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("number", range(len(EXAMPLES)))
def test_the_example_runs(db: MariaDB, number: int, tmp_path: Path) -> None:
    done = run_example(db, EXAMPLES[number], tmp_path)
    assert done.returncode == 0, f"example {number + 1}:\n{done.stderr}"
    assert "Traceback" not in done.stderr


def test_the_payment_example_debits_twice_without_the_fence(db: MariaDB, tmp_path: Path) -> None:
    """With fenced_write made a plain UPDATE, the paused worker debits a second time."""
    (payment,) = [example for example in EXAMPLES if "lease_a.token" in example]
    plain_update = (
        "from fencelock.sql import fence_column_ddl\n"
        "def fenced_write(db, table, key, token, values, **options):\n"
        "    for column, value in values.items():\n"
        "        db.cursor().execute(f'UPDATE {table} SET {column} = %s', (value,))\n"
    )
    unfenced = payment.replace(
        "from fencelock.sql import fence_column_ddl, fenced_write", plain_update
    )
    unfenced = unfenced.replace("except fencelock.StaleToken", "except fencelock.LeaseLost")
    unfenced = unfenced.replace("    assert debits == 1", "    print('debits:', debits)")
    assert "print('debits:'" in unfenced and "def fenced_write" in unfenced
    done = run_example(db, unfenced, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "debits: 2" in done.stdout
