"""fencelock.sql on MariaDB only (through PyMySQL and aiomysql): what the shared tests
(test_patterns.py) cannot say for both databases. A lock timeout that is the session's,
transactions told by the server status flags, row counts of rows changed, savepoints
lost to a deadlock, backtick quoting.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from typing import Any

import pymysql
import pytest
from pymysql.constants import CLIENT

from fencelock.errors import ConfigError, ConflictError, LockTimeout
from fencelock.sql import (
    TransactionLost,
    aoptimistic_update,
    fence_column_ddl,
    fenced_write,
    for_update,
    optimistic_update,
)
from fencelock.sql.mysql import MYSQL
from fencelock.sql.statement import FencedWrite
from fencelock.testing import MariaDBServer
from tests.polling import wait_until
from tests.sql.databases import Holder, MariaDB, error_code, row

DUPLICATE_COLUMN = 1060
DEADLOCK = 1213
RECORD_CHANGED = 1020


@pytest.fixture(scope="module")
def db(mariadb: MariaDBServer) -> MariaDB:
    return MariaDB(mariadb)


# --- row locks: the session's lock timeout, transactions by the status flags -----


def test_the_lock_timeout_is_put_back_whether_the_lock_was_granted_or_not(
    db: MariaDB, table: str
) -> None:
    """``innodb_lock_wait_timeout`` is the session's: put back after the SELECT, the
    lock granted or not; a lock not granted rolls back only the SELECT, and the wait is
    rounded up to a whole second."""
    other = Holder(db, table, 2)
    with db.connect() as conn:
        db.set_lock_wait(conn, 7)
        with db.transaction(conn):
            with for_update(conn, table, {"id": 1}, timeout=1) as locked:
                assert locked is not None
                assert db.lock_wait(conn) == 7
            db.query(conn, f"UPDATE {table} SET n = 5 WHERE id = 1")
            started = time.monotonic()
            with (
                pytest.raises(LockTimeout, match=r"0\.2s"),
                for_update(conn, table, {"id": 2}, timeout=0.2),
            ):
                pytest.fail("row 2 is held by another transaction")
            assert 0.9 <= time.monotonic() - started < 30  # 1 s: whole seconds
            assert db.lock_wait(conn) == 7
        other.release()
    assert row(db, table)[0] == 5  # the transaction went on and committed


def test_a_transaction_begun_with_autocommit_on_lasts_until_committed(
    db: MariaDB, table: str
) -> None:
    """``conn.begin()`` opens a transaction and ``commit()`` ends it, as the server status
    flags say: a row lock is refused before and after."""
    with db.connect() as conn:
        with (
            pytest.raises(ConfigError, match="needs a transaction"),
            for_update(conn, table, {"id": 1}),
        ):
            pytest.fail("not begun: the lock would have ended already")
        conn.begin()
        with for_update(conn, table, {"id": 1}) as locked:
            assert locked is not None
        conn.commit()
        with (
            pytest.raises(ConfigError, match="needs a transaction"),
            for_update(conn, table, {"id": 1}),
        ):
            pytest.fail("committed: no transaction open any more")


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


def upsert(table: str, values: dict[str, Any], token: int) -> FencedWrite:
    """A fenced upsert of row 1 of ``table``."""
    return FencedWrite(table, {"id": 1}, token, values, "fence_token", True, False)


def test_a_connection_counting_rows_matched_is_refused(db: MariaDB, table: str) -> None:
    """With ``CLIENT.FOUND_ROWS`` a refused upsert counts 1, as one that wrote does:
    fencelock.sql refuses such a connection rather than misread it."""
    db.sql(f"UPDATE {table} SET fence_token = 5 WHERE id = 1")
    refused = MYSQL.fenced_upsert(upsert(table, {"buyer": "stale"}, token=4))
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
    text = str(MYSQL.fenced_upsert(upsert(table, {"n": 0}, token=3)).query)
    assert "VALUES(" not in text  # deprecated since MySQL 8.0.20


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
        waiting = "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'"
        wait_until(
            lambda: self.db.sql(waiting)[0][0] >= 1,
            what="the victim to wait for row 1",
            interval=0.01,
        )

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
    assert len(errors) == 1, errors
    assert isinstance(errors[0], TransactionLost), errors
    assert error_code(errors[0].__cause__) == DEADLOCK
    assert row(db, table, 1)[0] == 20
    assert row(db, table, 2)[0] == 21  # the rival's


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
    assert error_code(lost.__cause__) == DEADLOCK
    assert row(db, table, 1)[0] == 20
    assert row(db, table, 2)[0] == 21


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
        assert error_code(caught.value.__cause__) == RECORD_CHANGED
    assert row(db, table)[0] == 0


# --- the fence column ----------------------------------------------------------


def test_fence_column_ddl_adds_a_nullable_bigint(db: MariaDB) -> None:
    """Backticks for any name (a backtick doubled, a ``%`` kept: it is run without
    parameters); no IF NOT EXISTS, so the second run fails."""
    name = f"T`{secrets.token_hex(4)}%s"
    db.sql(f"CREATE TABLE {db.quote(name)} (id int PRIMARY KEY)")
    ddl = fence_column_ddl(name, dialect="mysql")
    assert ddl == f"ALTER TABLE {db.quote(name)} ADD COLUMN `fence_token` BIGINT NULL"
    db.sql(ddl)
    with pytest.raises(pymysql.err.OperationalError) as caught:
        db.sql(ddl)
    assert error_code(caught.value) == DUPLICATE_COLUMN
    assert db.sql(
        "SELECT data_type, is_nullable FROM information_schema.columns"
        " WHERE table_name = %s AND column_name = 'fence_token'",
        (name,),
    ) == [("bigint", "YES")]
    assert fence_column_ddl(("fencelock", "payments"), "f", dialect="mysql") == (
        "ALTER TABLE `fencelock`.`payments` ADD COLUMN `f` BIGINT NULL"
    )


# --- the statements -------------------------------------------------------------


def test_the_lock_timeout_is_whole_seconds_at_least_one() -> None:
    seconds = (0, 0.2, 1, 1.2, 59.01, 1e12)
    timeouts = [MYSQL.set_lock_timeout(s).params["setting"] for s in seconds]
    assert timeouts == [1, 1, 1, 2, 60, 100_000_000]  # rounded up, and MariaDB's ceiling
