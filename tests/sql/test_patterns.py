"""fencelock.sql against a real PostgreSQL and a real MariaDB, each test on both (the
``db`` fixture, tests/sql/conftest.py): optimistic updates under contention, row locks
that wait, fail fast or skip, the fencing guard in the caller's transaction, the asyncio
twins, the statements' quoting for any name, and docs/sql-patterns.md run.

What only one database does is in test_patterns_postgresql.py and
test_patterns_mysql.py.
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
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fencelock import metrics
from fencelock.errors import ConfigError, ConflictError, LockTimeout, RowNotFound, StaleToken
from fencelock.sql import (
    RetryPolicy,
    afenced_write,
    afor_update,
    aoptimistic_update,
    fence_column_ddl,
    fenced_write,
    for_update,
    optimistic_update,
)
from fencelock.sql.dialect import Dialect
from fencelock.sql.statement import LOCK_MODES, FencedWrite, Statement
from tests.sql.databases import DATABASES, Database, Holder, name_text, row


def _rejections() -> int:
    """Fencing rejections this process has counted, every prefix together."""
    return sum(m.fencing_rejections for m in metrics.snapshot().values())


# --- optimistic ---------------------------------------------------------------


def test_eight_concurrent_writers_all_land_and_some_retry(db: Database, table: str) -> None:
    """Eight threads increment one counter ten times each through read-compute-write
    with a pause in the middle: every increment lands, and conflicts were retried."""
    start = threading.Barrier(8)
    retries: list[int] = []
    failures: list[BaseException] = []

    def slowly(current: dict[str, Any]) -> dict[str, Any]:
        time.sleep(0.002)  # widen the window between the read and the write
        return {"n": current["n"] + 1}

    def writer() -> None:
        try:
            with db.connect() as conn:
                start.wait()
                for _ in range(10):
                    result = optimistic_update(
                        conn, table, {"id": 1}, slowly, attempts=500, max_delay=0.02
                    )
                    retries.append(result.retries)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=writer) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert len(retries) == 80
    assert row(db, table)[0] == 80  # no increment lost
    assert row(db, table)[2] == 80  # each write bumped the version once
    assert sum(retries) > 0


def test_the_result_is_the_row_written(db: Database, table: str) -> None:
    with db.connect() as conn:
        result = optimistic_update(conn, table, {"id": 2}, lambda r: {"buyer": "ann", "n": 5})
    assert result.retries == 0
    assert result.version == 1
    assert result.row == {"id": 2, "n": 5, "buyer": "ann", "version": 1, "fence_token": None}
    assert row(db, table, 2) == (5, "ann", 1, None)


def test_a_change_to_the_key_is_followed(db: Database, table: str) -> None:
    """``changes`` may move the row to another key: the result is still the row written."""
    with db.connect() as conn:
        result = optimistic_update(conn, table, {"id": 2}, lambda r: {"id": 7, "n": 3})
    assert result.row == {"id": 7, "n": 3, "buyer": None, "version": 1, "fence_token": None}
    assert db.sql(f"SELECT id FROM {table} ORDER BY id") == [(1,), (7,)]


def test_gives_up_after_the_last_attempt_and_reports_the_retries(db: Database, table: str) -> None:
    """Another writer changes the row inside every attempt's window: after ``attempts``
    the update raises ConflictError, and its change was never written."""
    calls = 0

    def overtaken(current: dict[str, Any]) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        db.sql(f"UPDATE {table} SET version = version + 1 WHERE id = 1")
        return {"buyer": "mine"}

    with db.connect() as conn, pytest.raises(ConflictError) as caught:
        optimistic_update(conn, table, {"id": 1}, overtaken, attempts=3, base_delay=0.001)
    assert calls == 3
    assert (caught.value.attempts, caught.value.retries) == (3, 2)
    assert "3 attempt(s) (2 retries)" in str(caught.value)
    assert table in str(caught.value)
    assert "id=1" in str(caught.value)
    assert row(db, table)[1:3] == (None, 3)


def test_inside_the_callers_transaction_it_rolls_back_with_it(db: Database, table: str) -> None:
    def update_then_fail(conn: Any) -> None:
        with db.transaction(conn):
            optimistic_update(conn, table, {"id": 1}, lambda r: {"n": 9})
            assert db.query(conn, f"SELECT n FROM {table} WHERE id = 1") == [(9,)]
            raise RuntimeError("the caller's transaction fails")

    with db.connect() as conn, pytest.raises(RuntimeError, match="the caller's transaction"):
        update_then_fail(conn)
    assert row(db, table)[0] == 0


def test_an_error_in_changes_propagates_and_nothing_is_written(db: Database, table: str) -> None:
    def refuse(current: dict[str, Any]) -> dict[str, Any]:
        raise KeyError("sold out")

    with db.connect() as conn, pytest.raises(KeyError, match="sold out"):
        optimistic_update(conn, table, {"id": 1}, refuse)
    assert row(db, table)[2] == 0


def test_a_missing_row_and_a_bad_change_are_named(db: Database, table: str) -> None:
    with db.connect() as conn:
        with pytest.raises(RowNotFound, match=rf"{table}\(id=99\)"):
            optimistic_update(conn, table, {"id": 99}, lambda r: {"n": 1})
        with pytest.raises(ConfigError, match="version"):
            optimistic_update(conn, table, {"id": 1}, lambda r: {"version": 7})
        with pytest.raises(ConfigError, match="no version column 'rev'"):
            optimistic_update(conn, table, {"id": 1}, lambda r: {}, version_column="rev")
        with pytest.raises(ConfigError, match="attempts"):
            optimistic_update(conn, table, {"id": 1}, lambda r: {}, attempts=0)


def test_a_null_version_counts_as_zero(db: Database) -> None:
    name = f"t_{secrets.token_hex(4)}"
    db.sql(f"CREATE TABLE {name} (id int PRIMARY KEY, v int)")
    db.sql(f"INSERT INTO {name} VALUES (1, NULL)")
    with db.connect() as conn:
        result = optimistic_update(conn, name, {"id": 1}, lambda r: {}, version_column="v")
    assert result.version == 1


# --- pessimistic --------------------------------------------------------------


def test_nowait_raises_lock_timeout_while_another_transaction_holds_the_row(
    db: Database, table: str, holder: Holder
) -> None:
    with db.connect() as conn:
        started = time.monotonic()
        with (
            pytest.raises(LockTimeout) as caught,
            db.transaction(conn),
            for_update(conn, table, {"id": 1}, mode="nowait"),
        ):
            pytest.fail("the row is held by another transaction")
        assert time.monotonic() - started < 10
        assert f"{table}(id=1)" in str(caught.value)
        assert "nowait" in str(caught.value)
        assert db.not_granted(caught.value.__cause__)  # type: ignore[arg-type]
        holder.release()
        with db.transaction(conn), for_update(conn, table, {"id": 1}, mode="nowait") as locked:
            assert locked is not None
            assert locked["id"] == 1


def test_skip_locked_yields_none_for_a_held_row_and_another_free_one(
    db: Database, table: str, holder: Holder
) -> None:
    with db.connect() as conn:
        with db.transaction(conn), for_update(conn, table, {"id": 1}, mode="skip_locked") as held:
            assert held is None
        free_row = {"buyer": None}
        with db.transaction(conn), for_update(conn, table, free_row, mode="skip_locked") as free:
            assert free is not None
            assert free["id"] == 2


def test_a_lock_timeout_raises_after_about_the_timeout(
    db: Database, table: str, holder: Holder
) -> None:
    with db.connect() as conn:
        started = time.monotonic()
        with (
            pytest.raises(LockTimeout) as caught,
            db.transaction(conn),
            for_update(conn, table, {"id": 1}, timeout=0.5),
        ):
            pytest.fail("the row is held by another transaction")
        waited = time.monotonic() - started
        assert 0.45 <= waited < 30, waited
        assert f"{table}(id=1)" in str(caught.value)
        assert "0.5s" in str(caught.value)


def test_waiting_for_the_lock_sees_the_holders_write(db: Database, table: str) -> None:
    """The second buyer waits at the SELECT until the first commits, then reads the seat
    as sold: never sold twice."""
    first = db.connect()
    with db.transaction(first), for_update(first, table, {"id": 1}) as seat:
        assert seat is not None
        assert seat["buyer"] is None
        db.query(first, f"UPDATE {table} SET buyer = 'first' WHERE id = 1")
        seen: list[dict[str, Any] | None] = []

        def second() -> None:
            with (
                db.connect() as conn,
                db.transaction(conn),
                for_update(conn, table, {"id": 1}, timeout=30) as row_,
            ):
                seen.append(row_)

        thread = threading.Thread(target=second)
        thread.start()
        thread.join(0.3)
        assert thread.is_alive(), "the second buyer did not wait for the lock"
    thread.join(30)
    first.close()
    assert seen
    assert seen[0] is not None
    assert seen[0]["buyer"] == "first"


def test_the_lock_timeout_in_force_is_put_back_after_the_select(db: Database, table: str) -> None:
    """The caller's own lock timeout (7 s) is in force again once the row is locked
    with a timeout of 1 s."""
    with db.connect() as conn, db.transaction(conn):
        db.set_lock_wait(conn, 7)
        assert db.lock_wait(conn) == 7
        with for_update(conn, table, {"id": 1}, timeout=1) as locked:
            assert locked is not None
            assert db.lock_wait(conn) == 7


def test_refuses_an_autocommit_connection_with_no_transaction_open(
    db: Database, table: str
) -> None:
    """A row lock taken with no transaction open would end with its SELECT; with
    autocommit off, the SELECT opens one, which holds the lock."""
    with (
        db.connect() as conn,
        pytest.raises(ConfigError, match=r"needs a transaction.*conn\.begin"),
        for_update(conn, table, {"id": 1}),
    ):
        pytest.fail("the lock would have ended already")
    with db.connect(autocommit=False) as implicit:
        with for_update(implicit, table, {"id": 1}) as locked:
            assert locked is not None
        with (
            db.connect() as rival,
            pytest.raises(LockTimeout),
            db.transaction(rival),
            for_update(rival, table, {"id": 1}, mode="nowait"),
        ):
            pytest.fail("row 1 is the implicit transaction's")


def test_an_absent_row_yields_none_and_bad_arguments_are_refused(db: Database, table: str) -> None:
    with db.connect() as conn, db.transaction(conn):
        with for_update(conn, table, {"id": 99}) as absent:
            assert absent is None
        for kwargs in ({"mode": "later"}, {"mode": "nowait", "timeout": 1}, {"timeout": -1}):
            with (
                pytest.raises(ConfigError),
                for_update(conn, table, {"id": 1}, **kwargs),
            ):
                pass


# --- fencing ------------------------------------------------------------------


def test_the_fence_rejects_lower_and_equal_tokens_and_accepts_higher(
    db: Database, table: str
) -> None:
    rejections = _rejections()
    with db.connect() as conn:
        fenced_write(conn, table, {"id": 1}, 5, {"buyer": "five"})
        assert row(db, table)[1:] == ("five", 0, 5)
        for stale in (5, 4):
            with pytest.raises(StaleToken) as caught:
                fenced_write(conn, table, {"id": 1}, stale, {"buyer": "stale"})
            assert (caught.value.token, caught.value.last) == (stale, 5)
            assert caught.value.key == f"{table}(id=1)"
        assert row(db, table)[1:] == ("five", 0, 5)
        fenced_write(conn, table, {"id": 1}, 6, {"buyer": "six"})
        fenced_write(conn, table, {"id": 1}, 6, {"n": 1}, allow_equal=True)
    assert row(db, table) == (1, "six", 0, 6)
    assert _rejections() == rejections + 2


def test_a_rejected_write_rolls_back_with_the_write_it_protects(db: Database, table: str) -> None:
    ledger = f"{table}_ledger"
    db.sql(f"CREATE TABLE {ledger} (amount int)")
    db.sql(f"UPDATE {table} SET fence_token = 10 WHERE id = 1")

    def pay(conn: Any, token: int) -> None:
        with db.transaction(conn):
            db.query(conn, f"INSERT INTO {ledger} VALUES (-2500)")
            fenced_write(conn, table, {"id": 1}, token, {"buyer": "paid"})

    with db.connect() as conn:
        with pytest.raises(StaleToken):
            pay(conn, 9)
        assert db.sql(f"SELECT count(*) FROM {ledger}") == [(0,)]
        pay(conn, 11)
    assert db.sql(f"SELECT count(*) FROM {ledger}") == [(1,)]
    assert row(db, table)[1:] == ("paid", 0, 11)


def test_a_stale_writer_waits_for_the_newer_one_then_is_rejected(db: Database, table: str) -> None:
    """Both in flight: the older token's statement waits for the newer one's row lock,
    re-reads the fence once that commits, and is refused."""
    newer = db.connect()
    errors: list[BaseException] = []
    with db.transaction(newer):
        fenced_write(newer, table, {"id": 1}, 8, {"buyer": "newer"})

        def older() -> None:
            try:
                with db.connect() as conn:
                    fenced_write(conn, table, {"id": 1}, 7, {"buyer": "older"})
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=older)
        thread.start()
        thread.join(0.3)
        assert thread.is_alive(), "the older write did not wait for the row"
    thread.join(30)
    newer.close()
    assert len(errors) == 1
    assert isinstance(errors[0], StaleToken)
    assert row(db, table)[1:] == ("newer", 0, 8)


def test_a_stale_write_is_judged_by_the_latest_fence_not_an_older_read(
    db: Database, table: str
) -> None:
    """The caller's transaction read the row before a newer token wrote it: its stale
    write is refused with the fence the newer one left (not retried, not ConflictError),
    whatever the transaction's reads see."""

    def read_then_write_older(conn: Any) -> None:
        with db.transaction(conn):
            assert db.query(conn, f"SELECT fence_token FROM {table} WHERE id = 1") == [(None,)]
            with db.connect() as newer:
                fenced_write(newer, table, {"id": 1}, 8, {"buyer": "newer"})
            fenced_write(conn, table, {"id": 1}, 7, {"buyer": "older"})

    with db.connect() as conn, pytest.raises(StaleToken) as caught:
        read_then_write_older(conn)
    assert caught.value.last == 8
    assert row(db, table)[1:] == ("newer", 0, 8)


def test_the_upsert_inserts_a_missing_row_then_fences_it(db: Database, table: str) -> None:
    with db.connect() as conn:
        fenced_write(conn, table, {"id": 3}, 4, {"buyer": "new"}, upsert=True)
        assert row(db, table, 3) == (0, "new", 0, 4)
        with pytest.raises(StaleToken):
            fenced_write(conn, table, {"id": 3}, 4, {"buyer": "again"}, upsert=True)
        with pytest.raises(StaleToken):
            fenced_write(conn, table, {"id": 3}, 2, {"buyer": "older"}, upsert=True)
        fenced_write(conn, table, {"id": 3}, 5, {"buyer": "newer"}, upsert=True)
        fenced_write(conn, table, {"id": 1}, 1, {"buyer": "unfenced before"}, upsert=True)
        with pytest.raises(RowNotFound):
            fenced_write(conn, table, {"id": 4}, 9, {"buyer": "nobody"})
        with pytest.raises(ConfigError, match="fence_token"):
            fenced_write(conn, table, {"id": 1}, 9, {"fence_token": 1})
        with pytest.raises(ConfigError, match="int"):
            fenced_write(conn, table, {"id": 1}, "9", {})  # type: ignore[arg-type]
    assert row(db, table, 3) == (0, "newer", 0, 5)
    assert row(db, table, 1)[1:] == ("unfenced before", 0, 1)
    assert db.sql(f"SELECT count(*) FROM {table}") == [(3,)]


def test_an_equal_token_may_write_again_even_with_nothing_to_change(
    db: Database, table: str
) -> None:
    """With ``allow_equal``, the holder of the row's fence writes again, the same values
    too (a write with nothing to change is still accepted), plain or upsert."""
    with db.connect() as conn:
        for upsert in (False, True):
            for _ in range(2):
                fenced_write(conn, table, {"id": 1}, 5, {"buyer": "five"}, allow_equal=True)
                fenced_write(conn, table, {"id": 1}, 5, {}, allow_equal=True, upsert=upsert)
        with pytest.raises(StaleToken):
            fenced_write(conn, table, {"id": 1}, 5, {"buyer": "five"})
    assert row(db, table)[1:] == ("five", 0, 5)


def test_a_key_that_matches_several_rows_is_refused(db: Database, table: str) -> None:
    with (
        db.connect() as conn,
        pytest.raises(ConfigError, match="matched 2 rows"),
        db.transaction(conn),
    ):
        fenced_write(conn, table, {"buyer": None}, 1, {"n": 1})
    assert row(db, table, 1)[0] == row(db, table, 2)[0] == 0  # rolled back


def test_a_connection_of_the_wrong_variant_is_refused(db: Database, table: str) -> None:
    async def main() -> None:
        aconn = await db.aconnect()
        with pytest.raises(ConfigError, match=r"psycopg\.Connection"):
            fenced_write(aconn, table, {"id": 1}, 1, {})
        await db.aclose(aconn)

    asyncio.run(main())
    with db.connect() as conn, pytest.raises(ConfigError, match="AsyncConnection"):
        asyncio.run(afenced_write(conn, table, {"id": 1}, 1, {}))


# --- asyncio ------------------------------------------------------------------


def test_async_writers_all_land_and_some_retry(db: Database, table: str) -> None:
    """Eight tasks on eight connections, started together: their reads and writes
    interleave at every await, and every increment still lands."""

    async def writer(conn: Any) -> list[int]:
        retries = []
        for _ in range(5):
            result = await aoptimistic_update(
                conn, table, {"id": 1}, lambda r: {"n": r["n"] + 1}, attempts=500, max_delay=0.02
            )
            retries.append(result.retries)
        await db.aclose(conn)
        return retries

    async def main() -> list[list[int]]:
        conns = await asyncio.gather(*(db.aconnect() for _ in range(8)))
        return await asyncio.gather(*(writer(conn) for conn in conns))

    retries = asyncio.run(main())
    assert row(db, table)[0] == 40
    assert row(db, table)[2] == 40
    assert sum(map(sum, retries)) > 0


def test_async_conflict_and_missing_row(db: Database, table: str) -> None:
    def overtaken(current: dict[str, Any]) -> dict[str, Any]:
        db.sql(f"UPDATE {table} SET version = version + 1 WHERE id = 1")
        return {"n": 1}

    async def main() -> None:
        conn = await db.aconnect()
        with pytest.raises(ConflictError, match="1 retries"):
            await aoptimistic_update(conn, table, {"id": 1}, overtaken, attempts=2)
        with pytest.raises(RowNotFound):
            await aoptimistic_update(conn, table, {"id": 99}, overtaken)
        await db.aclose(conn)

    asyncio.run(main())
    assert row(db, table)[0] == 0


def test_async_inside_the_callers_transaction_it_rolls_back_with_it(
    db: Database, table: str
) -> None:
    async def main() -> None:
        async def update_then_fail(conn: Any) -> None:
            async with db.atransaction(conn):
                result = await aoptimistic_update(conn, table, {"id": 1}, lambda r: {"n": 9})
                assert result.row["n"] == 9
                raise RuntimeError("the caller's transaction fails")

        conn = await db.aconnect()
        with pytest.raises(RuntimeError, match="the caller's transaction"):
            await update_then_fail(conn)
        await db.aclose(conn)

    asyncio.run(main())
    assert row(db, table)[0] == 0


def test_async_row_locks(db: Database, table: str, holder: Holder) -> None:
    async def main() -> None:
        conn = await db.aconnect()
        with pytest.raises(ConfigError, match="needs a transaction"):
            async with afor_update(conn, table, {"id": 1}):
                pass
        with pytest.raises(LockTimeout, match=rf"{table}\(id=1\)"):
            async with db.atransaction(conn), afor_update(conn, table, {"id": 1}, mode="nowait"):
                pass
        async with (
            db.atransaction(conn),
            afor_update(conn, table, {"id": 1}, mode="skip_locked") as r,
        ):
            assert r is None
        started = time.monotonic()
        with pytest.raises(LockTimeout):
            async with db.atransaction(conn), afor_update(conn, table, {"id": 1}, timeout=0.5):
                pass
        assert 0.45 <= time.monotonic() - started < 30
        holder.release()
        async with (
            db.atransaction(conn),
            afor_update(conn, table, {"id": 1}, mode="nowait") as r,
        ):
            assert r is not None
            assert r["id"] == 1
        await db.aclose(conn)

    asyncio.run(main())


def test_async_fenced_write(db: Database, table: str) -> None:
    async def main() -> None:
        conn = await db.aconnect()
        await afenced_write(conn, table, {"id": 5}, 3, {"buyer": "three"}, upsert=True)

        async def update_then_write_older() -> None:
            async with db.atransaction(conn):
                await db.aquery(conn, f"UPDATE {table} SET n = 100 WHERE id = 1")
                await afenced_write(conn, table, {"id": 5}, 2, {"buyer": "two"})

        with pytest.raises(StaleToken):
            await update_then_write_older()
        await afenced_write(conn, table, {"id": 5}, 4, {"buyer": "four"})
        await db.aclose(conn)

    asyncio.run(main())
    assert row(db, table, 5)[1:] == ("four", 0, 4)
    assert row(db, table, 1)[0] == 0  # rolled back with the rejected write


# --- the statements, for any name ----------------------------------------------

values = st.one_of(st.integers(-(2**31), 2**31 - 1), st.text(max_size=5), st.none())


def statements(
    dialect: Dialect, table: str, key: dict[str, Any], changes: dict[str, Any], other: str
) -> list[tuple[Statement, tuple[str, ...]]]:
    """Every statement ``dialect`` builds, with the names each must quote."""
    names = (table, *key)
    every = (*names, *changes, other)
    setting = dialect.set_lock_timeout(5).params["setting"]  # of the dialect's own kind
    return [
        (dialect.select(table, key), names),
        *(
            (dialect.select((other, table), key, columns=[other], lock=mode), (*names, other))
            for mode in LOCK_MODES
        ),
        (dialect.versioned_update(table, key, changes, other, 3), every),
        (dialect.versioned_update(table, key, changes, other, None), every),
        (dialect.fenced_update(fenced(table, key, changes, other, upsert=False)), every),
        (dialect.fenced_upsert(fenced(table, key, changes, other, upsert=True)), every),
        (dialect.read_fence(fenced(table, key, {}, other, upsert=False)), (*names, other)),
        (dialect.lock_timeout_setting(), ()),
        (dialect.set_lock_timeout(0.0001), ()),
        (dialect.restore_lock_timeout(setting), ()),
    ]


def fenced(
    table: str,
    key: dict[str, Any],
    values: dict[str, Any],
    fence: str,
    *,
    upsert: bool,
) -> FencedWrite:
    """A fenced write that passes the checks, whatever the names: the fence (and, for
    an upsert, the key's columns) left out of ``values``, and an upsert's NULL key
    values made 0; an upsert allows an equal token, a plain write does not."""
    if upsert:
        key = {column: 0 if value is None else value for column, value in key.items()}
    taken = {fence, *key} if upsert else {fence}
    values = {column: value for column, value in values.items() if column not in taken}
    return FencedWrite(table, key, 7, values, fence, upsert, allow_equal=upsert)


def placeholders(text: str) -> set[str]:
    """The named placeholders psycopg finds in ``text``; a lone ``%`` fails."""
    found = set()
    for match in re.finditer(r"%%|%\((?P<name>[^)]*)\)s|%", text):
        assert match.group() != "%", f"a lone % at {match.start()}: {text!r}"
        if match.group("name") is not None:
            found.add(match.group("name"))
    return found


@given(
    table=name_text,
    key=st.dictionaries(name_text, values, min_size=1, max_size=3),
    changes=st.dictionaries(name_text, values, max_size=3),
    other=name_text,
)
def test_every_name_is_quoted_and_every_value_is_a_parameter(
    db: Database, table: str, key: dict[str, Any], changes: dict[str, Any], other: str
) -> None:
    for statement, names in statements(db.dialect, table, key, changes, other):
        text = db.text(statement)
        assert placeholders(text) == set(statement.params), text
        for name in names:
            quoted = db.quote(name).replace("%", "%%")  # in a statement with parameters
            assert quoted in text, (name, text)


@given(
    attempts=st.integers(1, 100),
    base=st.floats(0, 10),
    factor=st.floats(1, 100),
    retry=st.integers(0, 1000),
    draw=st.floats(0, 1, exclude_max=True),
)
def test_the_backoff_stays_in_its_doubling_window(
    attempts: int, base: float, factor: float, retry: int, draw: float
) -> None:
    policy = RetryPolicy(attempts, base, base * factor)
    delay = policy.delay(retry, lambda: draw)
    assert 0 <= delay <= policy.max_delay
    assert delay <= base * 2**retry
    if retry < 60 and base * 2**retry <= policy.max_delay:
        assert delay == pytest.approx(draw * base * 2**retry)


def test_a_retry_policy_refuses_nonsense() -> None:
    for args in ((0, 0.1, 1), (1.5, 0.1, 1), (3, -1, 1), (3, 1, 0.5), (3, float("nan"), 1)):
        with pytest.raises(ConfigError):
            RetryPolicy(*args)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    key=st.text(st.characters(exclude_characters="\x00", codec="utf-8"), max_size=8),
)
def test_any_names_work_against_the_database(db: Database, data: st.DataObject, key: str) -> None:
    """Tables and columns named anything the database takes (quotes, backticks, ``%``,
    ``%(k0)s``, spaces, any script) round-trip through every helper, and a fence column
    of any name can be added."""
    table, id_column, value_column, fence = data.draw(db.names, label="names")
    table = f"{table}_{secrets.token_hex(3)}"
    quote = db.quote
    db.sql(
        f"CREATE TABLE {quote(table)} ({quote(id_column)} {db.key_type} PRIMARY KEY,"
        f" {quote(value_column)} int, version int, {quote(fence)} bigint)"
    )
    try:
        with db.connect() as conn:
            where = {id_column: key}
            fenced_write(conn, table, where, 1, {value_column: 1}, fence_column=fence, upsert=True)
            with pytest.raises(StaleToken):
                fenced_write(conn, table, where, 1, {value_column: 2}, fence_column=fence)
            result = optimistic_update(
                conn, table, where, lambda r: {value_column: r[value_column] + 1}
            )
            assert result.row[value_column] == 2
            assert result.version == 1
            with db.transaction(conn), for_update(conn, table, where, timeout=5) as locked:
                assert locked is not None
                assert locked[fence] == 1
        db.sql(fence_column_ddl(table, f"{fence}_2", dialect=db.dialect_name))
    finally:
        db.sql(f"DROP TABLE {quote(table)}")


# --- docs/sql-patterns.md -------------------------------------------------------

PAGE = Path(__file__).resolve().parents[2] / "docs" / "sql-patterns.md"
MYSQL_HEADING = "## MySQL and MariaDB"


def page_section(dialect: str) -> str:
    """The page's text for ``dialect``: its MySQL section, or all the rest."""
    text = PAGE.read_text()
    start = text.index(f"\n{MYSQL_HEADING}\n")
    end = text.index("\n## ", start + 1)
    return text[start:end] if dialect == "mysql" else text[:start] + text[end:]


def examples(dialect: str) -> list[str]:
    """The page's Python examples for ``dialect``."""
    return re.findall(r"```python\n(.*?)```", page_section(dialect), flags=re.S)


def schema(dialect: str) -> list[str]:
    """The page's ``CREATE TABLE`` blocks for ``dialect``."""
    return re.findall(r"```sql\n(CREATE TABLE.*?)```", page_section(dialect), flags=re.S)


SHOWN = {  # what each part of the page shows
    "postgresql": (
        "for_update(",
        "afor_update(",
        "optimistic_update(",
        "fenced_write(",
        "lease",
        'mode="nowait"',
        'mode="skip_locked"',
        "timeout=",
        "fence_column_ddl(",
    ),
    "mysql": (
        "import pymysql",
        "import aiomysql",
        "for_update(",
        "afor_update(",
        "lease",
        "fenced_write(",
        'mode="skip_locked"',
        "timeout=",
        'dialect="mysql"',
    ),
}
EXAMPLES = [
    pytest.param(name, code, id=f"{name}-{number}")
    for name, database in DATABASES.items()
    for number, code in enumerate(examples(database.dialect_name), 1)
]


@pytest.mark.parametrize("part", SHOWN)
def test_the_page_shows_every_helper(part: str) -> None:
    text = "\n".join(examples(part))
    for shown in SHOWN[part]:
        assert shown in text, shown
    assert len(schema(part)) == 1


def run_example(db: Database, code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``code`` in a new interpreter, on the page's schema for ``db`` made afresh."""
    (tables,) = schema(db.dialect_name)
    names = re.findall(r"CREATE TABLE (\w+)", tables)
    db.sql(f"DROP TABLE IF EXISTS {', '.join(names)}")
    for statement in tables.split(";"):
        if statement.strip():
            db.sql(statement)
    locks = f"sqlite:///{tmp_path / 'locks.db'}"
    env = dict(os.environ, **{db.url_variable: db.url}, FENCELOCK_URL=locks)
    return subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(("db", "code"), EXAMPLES, indirect=["db"])
def test_the_example_runs(db: Database, code: str, tmp_path: Path) -> None:
    done = run_example(db, code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr


def test_the_payment_example_debits_twice_without_the_fence(db: Database, tmp_path: Path) -> None:
    """The failure the fence prevents is real: with fenced_write made a plain UPDATE,
    the payment example's paused worker debits a second time."""
    (payment,) = [code for code in examples(db.dialect_name) if "lease_a.token" in code]
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
    assert "print('debits:'" in unfenced
    assert "def fenced_write" in unfenced
    done = run_example(db, unfenced, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "debits: 2" in done.stdout
