"""postgresql+advisory:// beyond the contract (a killed session: test_revoked_sessions.py):
two names on one key are reported, a pooler in transaction mode is refused, and
one session never stacks a lock twice."""

from __future__ import annotations

import asyncio
import threading

import pytest

import fencelock
from fencelock.backends.postgresql.advisory_statements import advisory_key
from fencelock.errors import ConfigError
from fencelock.testing import PgBouncerServer, PostgreSQLServer, ServerPool


def advisory(url: str) -> str:
    return url.replace("postgresql://", "postgresql+advisory://", 1)


def holder_pid(server: PostgreSQLServer, name: str) -> int:
    key = advisory_key(name)
    rows = server.sql(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1"
        " AND classid = ((%(k)s >> 32) & 4294967295)::bigint::oid"
        " AND objid = (%(k)s & 4294967295)::bigint::oid",
        {"k": key},
    )
    assert len(rows) == 1, rows
    return int(rows[0][0])


def test_a_session_the_server_ended_leaves_nothing_watching_its_socket(
    postgres: PostgreSQLServer, name: str
) -> None:
    """When the server ends a session (here its idle_session_timeout, the TTL), libpq no
    longer tells the socket's number; the watch on it must still go, or the next
    connection given the same number meets a stale registration in the event loop
    (seen once as 'FileNotFoundError' from epoll, failing every later connect)."""

    async def main() -> None:
        async with fencelock.aconnect(advisory(postgres.url)) as client:
            for round_ in range(3):
                lease = await client.lock(f"{name}/{round_}", ttl=0.2, renew=False).acquire()
                # the loop runs while the server ends the idle session (0.2 s) and the
                # client sees it and closes the dead connection
                await asyncio.sleep(1.5)
                assert lease.lost
                again = await client.lock(f"{name}/next", ttl=5).acquire(timeout=10)
                await again.release()

    asyncio.run(main())


def test_two_names_on_one_key_are_reported_not_shared(
    postgres: PostgreSQLServer, name: str
) -> None:
    """A 64-bit hash collision is astronomically rare, so one is staged: the key's row
    names another lock. Taking ``name`` then fails, naming both, and leaves the key free."""
    url = advisory(postgres.url)
    with fencelock.connect(url) as client:
        client.lock(name).acquire(timeout=0).release()  # makes the table and the row
        postgres.sql(
            "UPDATE fencelock_advisory SET name = 'someone/else' WHERE key = %s",
            (advisory_key(name),),
        )
        with pytest.raises(ConfigError, match="someone/else") as raised:
            client.lock(name).acquire(timeout=0)
        assert name in str(raised.value)
        rows = postgres.sql(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
            " AND objid = (%(k)s & 4294967295)::bigint::oid",
            {"k": advisory_key(name)},
        )
        assert rows[0][0] == 0, "the colliding lock was left held"


def test_two_leases_of_one_client_never_stack_one_lock(
    postgres: PostgreSQLServer, name: str
) -> None:
    """PostgreSQL lets a session take an advisory lock it holds again; a second lease
    of the same name in the same client must wait for the first instead."""
    with fencelock.connect(advisory(postgres.url)) as client:
        first = client.lock(name, ttl=30).acquire()
        got: list[fencelock.Lease] = []
        waiter = threading.Thread(target=lambda: got.append(client.lock(name).acquire(timeout=30)))
        waiter.start()
        waiter.join(1.0)
        assert not got, "the same session took the lock twice"
        first.release()
        waiter.join(30)
        assert got
        assert got[0].token > first.token
        got[0].release()
        assert not client.locked(name)


@pytest.mark.parametrize("scheme", ["postgresql", "postgresql+advisory"])
def test_a_transaction_pooler_is_refused_with_a_clear_error(
    pool: ServerPool, postgres: PostgreSQLServer, scheme: str, name: str
) -> None:
    """Behind PgBouncer's transaction pooling, LISTEN and session locks silently do not
    work (tooz's advisory locks break there without a word): fencelock says so."""
    bouncer: PgBouncerServer = pool.pgbouncer(postgres, pool_mode="transaction", name=scheme)
    url = bouncer.url.replace("postgresql://", f"{scheme}://", 1)
    with pytest.raises(ConfigError, match="transaction"), fencelock.connect(url) as client:
        client.lock(name).acquire(timeout=0)


def test_session_pooling_works(pool: ServerPool, postgres: PostgreSQLServer, name: str) -> None:
    bouncer = pool.pgbouncer(postgres, pool_mode="session", name="session-pooling")
    with fencelock.connect(advisory(bouncer.url)) as client:
        lease = client.lock(name).acquire(timeout=0)
        assert client.locked(name)
        lease.release()
