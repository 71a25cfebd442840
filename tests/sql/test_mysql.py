"""mysql:// beyond the contract (a killed connection: test_revoked_sessions.py):
tokens survive a restart, names are never squeezed (long, upper-case, or colliding),
MariaDB's re-entrant GET_LOCK never leaks out, and bad input ends in a fencelock error
naming the problem."""

from __future__ import annotations

import socket
import threading
import time

import pytest

import fencelock
from fencelock.backends.mysql.statements import lock_name
from fencelock.errors import BackendUnavailable, ConfigError
from fencelock.testing import MariaDBServer, ServerPool


def test_tokens_keep_increasing_across_a_crash_and_restart(pool: ServerPool) -> None:
    server = pool.mariadb(name="mariadb-restarted")
    with fencelock.connect(server.url) as client:
        before = []
        for _ in range(3):
            lease = client.lock("restart/x").acquire()
            lease.release()
            before.append(lease)
    server.kill()
    server.start()
    with fencelock.connect(server.url) as client:
        after = client.lock("restart/x").acquire()
        assert after.token > max(lease.token for lease in before)
        after.release()


@pytest.mark.parametrize(
    "pair",
    [
        ("jobs/Nightly", "jobs/nightly"),  # MySQL's GET_LOCK names ignore case
        ("x" * 150 + "/a", "x" * 150 + "/b"),  # both past 64 characters
        ("reports/a@b=c+d", "reports/a-b-c-d"),  # hashed beside plain
    ],
    ids=["case", "long", "symbols"],
)
def test_distinct_names_are_distinct_locks(mariadb: MariaDBServer, pair: tuple[str, str]) -> None:
    first_name, second_name = pair
    with fencelock.connect(mariadb.url) as client, fencelock.connect(mariadb.url) as other:
        first = client.lock(first_name, ttl=30).acquire(timeout=0)
        second = other.lock(second_name, ttl=30).acquire(timeout=0)  # not blocked
        assert {i.name for i in client.list("")} >= {first_name, second_name}
        info = client.inspect(first_name)
        assert info is not None
        assert info.owner == first.owner
        first.release()
        second.release()


def test_two_names_on_one_lock_name_are_reported_not_shared(
    mariadb: MariaDBServer, name: str
) -> None:
    """A 128-bit hash collision cannot be found, so one is staged: the row of the lock
    name records another name. Taking ``name`` fails naming both, leaving it free."""
    long_name = name + "/" + "y" * 80
    with fencelock.connect(mariadb.url) as client:
        client.lock(long_name).acquire(timeout=0).release()
        mariadb.sql(
            "UPDATE fencelock_locks SET name = 'someone/else' WHERE lock_name = %s",
            (lock_name("fencelock:", long_name),),
        )
        with pytest.raises(ConfigError, match="someone/else"):
            client.lock(long_name).acquire(timeout=0)
        (used,) = mariadb.sql("SELECT IS_USED_LOCK(%s)", (lock_name("fencelock:", long_name),))
        assert used[0] is None, "the colliding lock was left held"


def test_mariadbs_reentrant_get_lock_never_lets_two_leases_share_a_name(
    mariadb: MariaDBServer, name: str
) -> None:
    """MariaDB counts a GET_LOCK its connection holds again; a second lease of one
    name in one client must wait for the first, and one release frees it for others."""
    with fencelock.connect(mariadb.url) as client, fencelock.connect(mariadb.url) as other:
        first = client.lock(name, ttl=30).acquire()
        got: list[fencelock.Lease] = []
        waiter = threading.Thread(target=lambda: got.append(client.lock(name).acquire(timeout=30)))
        waiter.start()
        waiter.join(1.0)
        assert not got, "one client held one name twice"
        first.release()
        waiter.join(30)
        assert got
        assert got[0].token > first.token
        got[0].release()
        other.lock(name).acquire(timeout=0).release()  # free: taken at once, or it raises


def test_a_url_with_no_server_listening_is_unavailable(name: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with (
        pytest.raises(BackendUnavailable, match="unreachable"),
        fencelock.connect(f"mysql://root:x@127.0.0.1:{port}/db?connect_timeout=2") as client,
    ):
        client.lock(name).acquire(timeout=0)


@pytest.mark.parametrize(
    ("make_url", "error", "match"),
    [
        (lambda s: s.url.replace(":fencelock@", ":wrong@"), BackendUnavailable, "credentials"),
        (lambda s: s.url.rsplit("/", 1)[0] + "/nosuchdb", ConfigError, "Unknown database"),
        (lambda s: s.url.rsplit("/", 1)[0], ConfigError, "must name one database"),
        (lambda s: s.url + "?prefix=Bad%20Prefix", ConfigError, "at most 24 of"),
        (lambda s: s.url + "?colour=blue", ConfigError, "unknown option 'colour'"),
        (lambda s: s.url + "?timeout=0", ConfigError, "must be a number"),
        (lambda s: s.url + "?ssl_ca=/nonexistent/ca.pem", ConfigError, "cannot read the CA file"),
        (lambda s: s.url.replace("@", "@127.0.0.1:1,", 1), ConfigError, "one server"),
    ],
    ids=[
        "wrong-password",
        "missing-database",
        "no-database",
        "bad-prefix",
        "unknown-option",
        "bad-timeout",
        "missing-ca-file",
        "two-hosts",
    ],
)
def test_bad_input_gets_a_fencelock_error_naming_it(
    mariadb: MariaDBServer, name: str, make_url: object, error: type[Exception], match: str
) -> None:
    url = make_url(mariadb)  # type: ignore[operator]
    with pytest.raises(error, match=match) as raised, fencelock.connect(url) as client:
        client.lock(name).acquire(timeout=0)
    assert "fencelock@" not in str(raised.value), "the password leaked into the message"


def test_a_server_that_is_not_mysql_is_named(pool: ServerPool, name: str) -> None:
    redis = pool.redis(name="not-mysql")
    url = f"mysql://root:x@{redis.address}/db?connect_timeout=2"
    with pytest.raises(BackendUnavailable, match="MySQL"), fencelock.connect(url) as client:
        client.lock(name).acquire(timeout=0)


def test_a_pooled_connection_the_server_timed_out_is_not_reused(
    mariadb: MariaDBServer, name: str
) -> None:
    """A lease of TTL 1 s leaves its connection with wait_timeout = 1 s; idle past
    that, the server closes it, and the next acquire must not fail on it."""
    with fencelock.connect(mariadb.url) as client:
        client.lock(name, ttl=1, renew=False).acquire().release()
        time.sleep(2.5)
        lease = client.lock(name, ttl=30).acquire(timeout=0)
        assert client.inspect(name) is not None
        lease.release()
