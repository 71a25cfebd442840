"""postgresql:// beyond the contract: leases outlive connections and restarts, names
are never squeezed into a hash, the SQL shown to a DBA is the SQL run, and bad input
ends in a fencelock error naming the problem."""

from __future__ import annotations

import secrets
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import fencelock
from fencelock.backends.base import Acquired
from fencelock.backends.postgresql.backend import AsyncPostgresBackend, release_mark
from fencelock.backends.postgresql.statements import review
from fencelock.backends.shared_loop import SharedLoopBackend
from fencelock.errors import BackendUnavailable, ConfigError
from fencelock.testing import PostgreSQLServer, ServerPool

FENCELOCK = str(Path(sys.executable).parent / "fencelock")
DOCS = Path(__file__).resolve().parents[2] / "docs" / "backends.md"


def terminate_fencelock_sessions(server: PostgreSQLServer) -> int:
    rows = server.sql(
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE application_name = 'fencelock') AS killed"
    )
    return int(rows[0][0])


def test_killed_connections_lose_no_lease(postgres: PostgreSQLServer, name: str) -> None:
    """The lease is a row, not a session: killing every connection the client has
    (its listener too) loses nothing, and the client carries on on new ones."""
    with fencelock.connect(postgres.url) as client:
        lease = client.lock(name, ttl=30).acquire()
        assert terminate_fencelock_sessions(postgres) >= 1
        info = client.inspect(name)  # a new connection
        assert info is not None
        assert info.owner is not None
        assert info.token == lease.token
        lease.extend(30)
        assert not lease.lost
        lease.release()
        assert not client.locked(name)


def test_a_waiter_is_woken_after_its_listening_connection_was_killed(
    postgres: PostgreSQLServer, name: str
) -> None:
    """A killed listener rings every bell: the waiter looks again, listens anew, and is
    woken by the next release (not by its timeout)."""
    with fencelock.connect(postgres.url) as holder, fencelock.connect(postgres.url) as waiter:
        lease = holder.lock(name, ttl=30).acquire()
        got: list[fencelock.Lease] = []
        thread = threading.Thread(target=lambda: got.append(waiter.lock(name).acquire(timeout=60)))
        thread.start()
        deadline = _deadline(30)
        while (info := holder.inspect(name)) is None or not info.waiters:
            assert not _passed(deadline), "the waiter never queued"
        terminate_fencelock_sessions(postgres)
        lease.release()
        thread.join(30)
        assert got
        assert got[0].token > lease.token
        got[0].release()


def test_tokens_keep_increasing_across_a_crash_and_restart(
    pool: ServerPool, tmp_path: Path
) -> None:
    server = pool.postgresql(name="postgresql-restarted")
    with fencelock.connect(server.url) as client:
        before = [client.lock(f"restart/{i}").acquire() for i in range(3)]
        for lease in before:
            lease.release()
    server.kill()  # SIGKILL: no shutdown checkpoint
    server.start()
    with fencelock.connect(server.url) as client:
        after = client.lock("restart/0").acquire()
        assert after.token > max(lease.token for lease in before)
        after.release()


def test_two_thousand_names_never_share_a_lock(postgres: PostgreSQLServer) -> None:
    """tooz's PostgreSQL driver hashes names into 65,536 advisory keys; here a name is
    its own row: every one of 2,000 names is held at once, each by its own lease."""
    prefix = f"many{secrets.token_hex(3)}/"
    with fencelock.connect(postgres.url) as client:
        leases = [client.lock(f"{prefix}{i}", ttl=60).acquire(timeout=0) for i in range(2000)]
        assert len({lease.token for lease in leases}) == 2000
        assert len(client.list(prefix)) == 2000
        for lease in leases:
            lease.release()


def test_a_user_without_create_privilege_is_told_which_to_grant(
    postgres: PostgreSQLServer,
) -> None:
    role = f"app_{secrets.token_hex(3)}"
    postgres.sql(f"CREATE ROLE {role} LOGIN PASSWORD 'secret'")
    postgres.sql(f"CREATE SCHEMA IF NOT EXISTS {role}_locks")  # owned by postgres
    postgres.sql(f"GRANT USAGE ON SCHEMA {role}_locks TO {role}")
    url = f"postgresql://{role}:secret@{postgres.address}/postgres?schema={role}_locks"
    with (
        pytest.raises(ConfigError, match="Grant it CREATE") as raised,
        fencelock.connect(url) as client,
    ):
        client.lock("x").acquire(timeout=0)
    assert role in str(raised.value)
    assert "secret" not in str(raised.value)
    # once an owner ran `fencelock init` and granted the rights, the user can lock
    run_cli("init", "--url", postgres.url + f"?schema={role}_locks")
    postgres.sql(
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {role}_locks TO {role}"
    )
    postgres.sql(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA {role}_locks TO {role}")
    with fencelock.connect(url) as client:
        lease = client.lock("x").acquire(timeout=0)
        assert lease.token >= 1
        lease.release()


def test_the_sql_in_the_docs_is_the_sql_fencelock_runs() -> None:
    shown = run_cli("init", "--sql", "--url", "postgresql://u@h/db")
    assert shown == review("public")
    assert shown.strip() in DOCS.read_text(), "docs/backends.md shows other SQL: paste it anew"


def test_a_url_with_no_server_listening_is_unavailable(name: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with (
        pytest.raises(BackendUnavailable, match="unreachable"),
        fencelock.connect(
            f"postgresql://postgres:x@127.0.0.1:{port}/postgres?connect_timeout=2"
        ) as client,
    ):
        client.lock(name).acquire(timeout=0)


@pytest.mark.parametrize(
    ("make_url", "error", "match"),
    [
        (lambda s: s.url.replace(":fencelock@", ":wrong@"), BackendUnavailable, "credentials"),
        (
            lambda s: s.url.rsplit("/", 1)[0] + "/nosuchdb",
            ConfigError,
            'database "nosuchdb" does not',
        ),
        (lambda s: s.url + "?schema=nosuchschema", ConfigError, "does not exist"),
        (lambda s: s.url + "?schema=Bad-Name", ConfigError, "lower-case SQL identifier"),
        (lambda s: s.url + "?colour=blue", ConfigError, "unknown option 'colour'"),
        (lambda s: s.url + "?timeout=-1", ConfigError, "must be a number"),
        (
            lambda s: s.url + "?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
            ConfigError,
            "sslrootcert='/nonexistent/ca.pem'.*: no such file",
        ),
    ],
    ids=[
        "wrong-password",
        "missing-database",
        "missing-schema",
        "bad-schema",
        "unknown-option",
        "bad-timeout",
        "missing-ca-file",
    ],
)
def test_bad_input_gets_a_fencelock_error_naming_it(
    postgres: PostgreSQLServer, name: str, make_url: object, error: type[Exception], match: str
) -> None:
    url = make_url(postgres)  # type: ignore[operator]
    with pytest.raises(error, match=match) as raised, fencelock.connect(url) as client:
        client.lock(name).acquire(timeout=0)
    assert "fencelock@" not in str(raised.value), "the password leaked into the message"


def test_a_server_that_is_not_postgresql_is_named(pool: ServerPool, name: str) -> None:
    redis = pool.redis(name="not-postgres")
    url = f"postgresql://postgres:x@{redis.address}/postgres?connect_timeout=2"
    with pytest.raises(BackendUnavailable, match="PostgreSQL"), fencelock.connect(url) as client:
        client.lock(name).acquire(timeout=0)


def run_cli(*args: str) -> str:
    done = subprocess.run(
        [FENCELOCK, *args], check=False, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _deadline(seconds: float) -> float:
    return time.monotonic() + seconds


def _passed(deadline: float) -> bool:
    time.sleep(0.01)
    return time.monotonic() > deadline


def test_every_statement_may_run_twice_with_the_same_effect(
    postgres: PostgreSQLServer, name: str
) -> None:
    """A statement sent on a connection that turns out dead is sent again on a new
    one; for that to be safe, a second acquire by the same owner returns the same
    token and a release sent again still says the lease was held (while a separate
    second release, as a second ``evict``, says it was not)."""
    with fencelock.connect(postgres.url) as client:
        backend, owner = client.internals.backend, secrets.token_hex(20)
        first = backend.attempt(name, owner, 30)
        again = backend.attempt(name, owner, 30)
        try:
            granted, regranted = first.try_acquire(), again.try_acquire()
        finally:
            first.close()
            again.close()
        assert isinstance(granted, Acquired)
        assert isinstance(regranted, Acquired)
        assert regranted.token == granted.token
        assert backend.renew(name, owner, 30)
        assert backend.renew(name, owner, 30)
        assert isinstance(backend, SharedLoopBackend)
        inner = backend._backend()
        assert isinstance(inner, AsyncPostgresBackend)
        params = {"name": name, "owner": owner, "mark": release_mark()}

        def send_release() -> bool:
            sent = inner.connections.fetchall(inner.statements.release, params)
            return bool(backend._loop.run(sent))

        assert send_release()
        assert send_release()  # the same release, sent again
        assert not backend.release(name, owner)  # another release: not held any more
        assert not backend.renew(name, owner, 30)  # released is released
        successor = client.lock(name).acquire(timeout=0)
        assert successor.token > granted.token
        successor.release()


def test_a_release_wakes_the_head_of_the_line_only(
    postgres: PostgreSQLServer, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With N waiters, a release that woke them all would cost N acquire statements
    (each asking in vain but one); it names the head, and only the head asks. Four
    waiters, each releasing as soon as it holds: four releases, four asks."""
    from fencelock.backends.postgresql import backend as pg_backend
    from fencelock.engine import barging

    monkeypatch.setattr(barging, "WAITER_REFRESH", 10.0)  # no refreshes meanwhile
    monkeypatch.setattr(barging, "WAITER_LIVENESS", 30.0)
    asked: list[str] = []
    original = pg_backend.PostgresAttempt.try_acquire

    async def counted(self: pg_backend.PostgresAttempt) -> object:
        asked.append(self._owner)
        return await original(self)

    monkeypatch.setattr(pg_backend.PostgresAttempt, "try_acquire", counted)
    clients = [fencelock.connect(postgres.url) for _ in range(5)]
    try:
        holder = clients[0].lock(name, ttl=30).acquire()
        got: list[fencelock.Lease] = []

        def wait_then_release(client: fencelock.Client) -> None:
            lease = client.lock(name).acquire(timeout=60)
            got.append(lease)
            lease.release()

        waiters = [threading.Thread(target=wait_then_release, args=(c,)) for c in clients[1:]]
        for number, waiter in enumerate(waiters, 1):
            waiter.start()
            deadline = _deadline(30)
            while (info := clients[0].inspect(name)) is None or info.waiters != number:
                assert not _passed(deadline), "a waiter never queued"
        before = len(asked)
        holder.release()
        for waiter in waiters:
            waiter.join(60)
        assert not any(waiter.is_alive() for waiter in waiters), "a waiter was never woken"
        # every ask a waiter makes is made inside its acquire, so before its thread ended
        asks = len(asked) - before
        assert asks == len(waiters), f"{asks} asks after {len(waiters)} releases"
        assert len(got) == 4
        assert [g.token for g in got] == sorted(g.token for g in got)
    finally:
        for client in clients:
            client.close()


def test_init_sql_prints_each_sql_backends_statements_and_refuses_others() -> None:
    assert "GET_LOCK" in run_cli("init", "--sql", "--url", "mysql://u@h/db")
    assert "pg_try_advisory_lock" in run_cli(
        "init", "--sql", "--url", "postgresql+advisory://u@h/db"
    )
    done = subprocess.run(
        [FENCELOCK, "init", "--sql", "--url", "redis://127.0.0.1:1/0"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 64, done.stderr
    assert "keeps no SQL schema" in done.stderr
    assert done.stdout == ""
