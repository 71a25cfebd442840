"""``sqlite:///path``: the embedded default, for many processes on one host.

One row per lock name holds the owner, the last token and the expiry. Taking
the lease and issuing its token is one ``INSERT ... ON CONFLICT DO UPDATE``
inside one write transaction, so tokens never repeat; the row outlives release
and expiry, and the file outlives restarts, so tokens never go backwards.

Expiry is measured on the host's boot-time clock (:mod:`fencelock.clock`), one
clock for every process on the host; a lease written during an earlier boot is
expired, since its holder cannot still be running.

Waiters queue a doorbell (:mod:`fencelock.backends.sqlite.wakeup_socket`) in the same
transaction that found the lease busy. A release rings the oldest live waiter
only (no thundering herd); a waiter that leaves the queue while the lease is
free passes the ring on, so a wake-up is never swallowed by a departing waiter.
Who may take a free lease while others wait is :mod:`fencelock.engine.barging`'s
rule (anyone, until the oldest waiter has waited 20 ms; ``fair``: only the oldest).
"""

from __future__ import annotations

import builtins
import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from fencelock import clock, forking
from fencelock.backends.base import Acquired, AttemptResult, Busy, LockInfo, Renewal
from fencelock.backends.sqlite import liveness
from fencelock.backends.sqlite.wakeup_socket import WakeupSender, WakeupSocket
from fencelock.engine.barging import (
    Waiter,
    alive_until,
    busy_wait,
    handoff,
    oldest_live,
    starvation_bound,
)
from fencelock.engine.urls import (
    COMMON_OPTIONS,
    ParsedURL,
    number_option,
    reject_unknown_options,
)
from fencelock.errors import BackendUnavailable, ConfigError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS fencelock_leases (
    name TEXT PRIMARY KEY,
    owner TEXT,
    token INTEGER NOT NULL,
    expires_at REAL NOT NULL,
    boot TEXT NOT NULL,
    since REAL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS fencelock_queue (
    seq INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    address BLOB NOT NULL UNIQUE
);
CREATE INDEX IF NOT EXISTS fencelock_queue_name ON fencelock_queue (name, seq);
"""

# Columns added since the tables were first made: ALTER TABLE adds them to older files.
# The queue's came with the starvation bound, and its ``owner`` (the waiter's owner
# value, NULL from an older fencelock) with ``lock.contenders()``; the lease's ``since``
# (the Unix time of its grant) with holder descriptions; ``pidns`` (the PID namespace
# the lease was taken in) with taking a crashed holder's lease at once (:mod:`.liveness`).
_ADDED_COLUMNS = {
    "fencelock_queue": {
        "arrived": "REAL NOT NULL DEFAULT 0",
        "alive_until": "REAL NOT NULL DEFAULT 0",
        "owner": "TEXT",
    },
    "fencelock_leases": {"since": "REAL", "pidns": "TEXT"},
}

_QUEUE = """
SELECT address, arrived, alive_until FROM fencelock_queue WHERE name = ? ORDER BY seq
"""

_JOIN = """
INSERT INTO fencelock_queue (name, address, arrived, alive_until, owner)
VALUES (:name, :address, :now, :alive_until, :owner)
ON CONFLICT (address) DO UPDATE SET alive_until = excluded.alive_until
"""

_TAKE = """
INSERT INTO fencelock_leases (name, owner, token, expires_at, boot, since, pidns)
VALUES (:name, :owner, 1, :expires_at, :boot, :since, :pidns)
ON CONFLICT (name) DO UPDATE SET
    owner = excluded.owner, token = token + 1, expires_at = excluded.expires_at,
    boot = excluded.boot, since = excluded.since, pidns = excluded.pidns
WHERE owner IS NULL OR boot != excluded.boot OR expires_at <= :now OR owner = :crashed
RETURNING token
"""

_MAX_CONTENDED = 1024

_INFO_COLUMNS = "name, owner, token, expires_at, boot, since"
_LIVE = "owner IS NOT NULL AND boot = :boot AND expires_at > :now"


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown-boot"


def _create(path: str) -> None:
    """Create the database file as the umask allows, if it is new.

    SQLite alone creates it 0644 whatever the umask, so a group sharing a directory
    (docs/backends.md) could never write it; its -wal and -shm files take its mode.
    """
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))


def _prepare(conn: sqlite3.Connection) -> None:
    if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("BEGIN IMMEDIATE")  # waits on the busy handler, unlike a lock upgrade
    try:
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        for table, added in _ADDED_COLUMNS.items():
            columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
            for column, declaration in added.items():
                if column not in columns:
                    conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def database_path(parsed: ParsedURL) -> str:
    """``sqlite:///rel.db`` is relative to the working directory, ``sqlite:////abs.db`` absolute."""
    if parsed.hosts:
        raise ConfigError(
            f"sqlite URL {parsed.redacted!r} has a host; "
            "use sqlite:///relative.db or sqlite:////abs.db"
        )
    path = parsed.path[1:] if parsed.path.startswith("/") else parsed.path
    if not path:
        raise ConfigError(f"sqlite URL {parsed.redacted!r} names no file: use sqlite:///path/to.db")
    return path


class _Waiters:
    """The queue for one name, oldest first, read only as far as it is iterated."""

    def __init__(self, conn: sqlite3.Connection, name: str) -> None:
        self._conn, self._name = conn, name

    def __iter__(self) -> Iterator[Waiter[bytes]]:
        cursor = self._conn.execute(_QUEUE, (self._name,))
        try:
            for address, arrived, alive in cursor:
                yield Waiter(bytes(address), float(arrived), float(alive))
        finally:
            cursor.close()  # a read left unfinished would hold its statement open


def _drop(conn: sqlite3.Connection, addresses: tuple[bytes, ...]) -> None:
    if addresses:
        conn.executemany("DELETE FROM fencelock_queue WHERE address = ?", [(a,) for a in addresses])


class SQLiteAttempt:
    """One acquisition; its doorbell and queue entry exist only once it has had to wait."""

    def __init__(
        self,
        backend: SQLiteBackend,
        name: str,
        owner: str,
        ttl: float,
        bound: float,
        renewed: bool = True,
    ) -> None:
        self._backend, self._name, self._owner, self._ttl = backend, name, owner, ttl
        self._bound, self._renewed = bound, renewed
        self._doorbell: WakeupSocket | None = None
        self._queued = False

    def try_acquire(self) -> AttemptResult:
        if self._doorbell is None and self._name in self._backend.contended:
            self._doorbell = WakeupSocket()  # likely to wait: queue in the first transaction
        address = None if self._doorbell is None else self._doorbell.address
        take = self._backend.take
        result = take(self._name, self._owner, self._ttl, address, self._bound, self._renewed)
        if isinstance(result, Busy) and self._doorbell is None:
            # Queue a doorbell and look again in the same transaction, so that a
            # release between the two looks cannot go unnoticed.
            self._doorbell = WakeupSocket()
            address = self._doorbell.address
            result = take(self._name, self._owner, self._ttl, address, self._bound, self._renewed)
        self._queued = isinstance(result, Busy)
        return result

    def wait(self, timeout: float) -> None:
        """Until rung, the holder's process exits (a crash frees the lease at once), or
        ``timeout``."""
        if self._doorbell is None:
            return
        owner, namespace = self._backend.live_holder(self._name)
        if liveness.crashed(owner, namespace):
            return
        exited = liveness.exit_notice(owner, namespace)
        try:
            self._doorbell.wait(timeout, exited)
        finally:
            if exited is not None:
                os.close(exited)

    def interrupt(self) -> None:
        doorbell = self._doorbell
        if doorbell is not None:
            doorbell.ring_itself()

    def close(self) -> None:
        if self._doorbell is not None:
            self._doorbell.close()
            if self._queued:
                self._backend.leave_queue(self._name, self._doorbell.address)
            self._doorbell = None


class SQLiteBackend:
    """Leases in an SQLite file shared by the processes of one host."""

    supports_fair = True
    renews_in_batches = True

    def outlives_client(self, renewed: bool) -> bool:
        """Whether a lease left to its TTL stays on the server after the client closes."""
        return True

    def __init__(self, parsed: ParsedURL) -> None:
        reject_unknown_options(parsed, COMMON_OPTIONS | {"busy_timeout"})
        self.url = parsed.redacted
        self.path = database_path(parsed)
        # timeout: how long one statement waits for the file's write lock (busy_timeout
        # is its older name); connect_timeout: how long opening the file may take.
        self._busy_timeout = number_option(
            parsed, "timeout", number_option(parsed, "busy_timeout", 10.0)
        )
        self._connect_timeout = number_option(parsed, "connect_timeout", self._busy_timeout)
        self._boot = _boot_id()
        self._pidns = liveness.pid_namespace()
        self._mutex = threading.RLock()
        self._ringer = WakeupSender()
        # Names this client last saw waiters on: an attempt on one brings its doorbell
        # to its first try, saving the second transaction of a try that has to queue.
        self.contended: set[str] = set()
        self._conn: sqlite3.Connection | None = self._open()
        self._closed = False
        forking.register(self)

    def _reset_after_fork(self) -> None:
        """In a forked child: a connection of its own on first use.

        SQLite forbids carrying a connection across fork() ("How To Corrupt An SQLite
        Database File", 2.6): the parent's is abandoned here, neither used nor closed.
        """
        self._mutex = threading.RLock()
        if not self._closed:
            forking.abandon(self._conn)
            self._conn = None

    def _db(self) -> sqlite3.Connection:
        """This process's connection (call with the mutex held)."""
        if self._conn is None:
            self._conn = self._open()
        return self._conn

    def _open(self) -> sqlite3.Connection:
        deadline = time.monotonic() + self._connect_timeout
        while True:
            try:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
                _create(self.path)
                conn = sqlite3.connect(
                    self.path,
                    timeout=self._busy_timeout,
                    isolation_level=None,
                    check_same_thread=False,
                )
            except (OSError, sqlite3.Error) as exc:
                raise self._cannot_open(exc) from exc
            try:
                _prepare(conn)
                return conn
            except sqlite3.OperationalError as exc:
                conn.close()
                # Switching to WAL or creating the tables can meet SQLITE_BUSY without
                # the busy handler when processes open a new file at once: try again.
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise self._cannot_open(exc) from exc
                time.sleep(0.005)
            except sqlite3.Error as exc:
                conn.close()
                raise self._cannot_open(exc) from exc

    def _cannot_open(self, exc: Exception) -> BackendUnavailable:
        return BackendUnavailable(
            f"cannot open SQLite database {os.path.abspath(self.path)!r}: {exc}"
        )

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._mutex, self._translated():
            conn = self._db()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    @contextlib.contextmanager
    def _translated(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise BackendUnavailable(
                f"SQLite database {os.path.abspath(self.path)!r} failed: {exc}"
            ) from exc

    def attempt(
        self, name: str, owner: str, ttl: float, fair: bool = False, renewed: bool = True
    ) -> SQLiteAttempt:
        return SQLiteAttempt(self, name, owner, ttl, starvation_bound(fair), renewed)

    def take(
        self,
        name: str,
        owner: str,
        ttl: float,
        doorbell: bytes | None,
        bound: float,
        renewed: bool = True,
    ) -> AttemptResult:
        """One transaction: take the lease if it is free and the queue lets ``doorbell``
        (None: not queued yet) have it; else queue ``doorbell`` and say how long to wait."""
        with self._transaction() as conn:
            now = clock.now()
            verdict = handoff(_Waiters(conn, name), doorbell, now, bound)
            _drop(conn, verdict.expired)
            if verdict.may_take:
                params = {"name": name, "owner": owner, "expires_at": now + ttl}
                params |= {"boot": self._boot, "now": now, "since": time.time()}
                # A renewed lease lives as long as its process: recorded with the PID
                # namespace, it is taken at once once that process is gone. One not
                # renewed is meant to last its TTL, whoever exits (run-once's at_least).
                params |= {"pidns": self._pidns if renewed else None, "crashed": None}
                row = conn.execute(_TAKE, params).fetchone()
                if row is None:  # held: by a process that still runs?
                    params["crashed"] = self._crashed_holder(conn, name, now)
                    if params["crashed"] is not None:
                        row = conn.execute(_TAKE, params).fetchone()
                if row is not None:
                    if doorbell is not None:
                        conn.execute("DELETE FROM fencelock_queue WHERE address = ?", (doorbell,))
                    return Acquired(int(row[0]))
            if doorbell is not None:
                params = {"name": name, "address": doorbell, "now": now, "owner": owner}
                conn.execute(_JOIN, {**params, "alive_until": alive_until(now)})
            remaining, expired = self._holder(conn, name, now)
        self._saw_waiters(name, True)
        if expired and verdict.kept_for is not None:
            self._wake(name, verdict.kept_for.key)
        return Busy(busy_wait(remaining))

    def _wake(self, name: str, address: bytes) -> None:
        """Ring the waiter a lease that expired is kept for (a release would have rung
        it; an expiry rang nobody); if its process is gone, pass the lease on.

        Only once our transaction is over: woken while we still held the write lock, the
        waiter would meet SQLITE_BUSY, whose handler sleeps at least a millisecond."""
        if not self._ringer.ring(address):
            with self._transaction() as conn:
                _drop(conn, (address,))
            self._wake_next(name)

    def _crashed_holder(self, conn: sqlite3.Connection, name: str, now: float) -> str | None:
        """The owner of ``name``'s live lease if its process is known to be gone."""
        row = conn.execute(
            f"SELECT owner, pidns FROM fencelock_leases WHERE name = :name AND {_LIVE}",
            {"name": name, "boot": self._boot, "now": now},
        ).fetchone()
        if row is None or not liveness.crashed(row[0], row[1]):
            return None
        return str(row[0])

    def leave_to_ttl(self, name: str, owner: str) -> None:
        """The holder leaves its lease to its TTL (``expire_in``): it may exit now, and
        the lease stays taken until then."""
        with self._transaction() as conn:
            conn.execute(
                "UPDATE fencelock_leases SET pidns = NULL WHERE name = ? AND owner = ?",
                (name, owner),
            )

    def live_holder(self, name: str) -> tuple[str | None, str | None]:
        """The owner and PID namespace of ``name``'s live lease (Nones if it is free)."""
        with self._mutex, self._translated():
            row = (
                self._db()
                .execute(
                    f"SELECT owner, pidns FROM fencelock_leases WHERE name = :name AND {_LIVE}",
                    {"name": name, "boot": self._boot, "now": clock.now()},
                )
                .fetchone()
            )
        return (None, None) if row is None else (row[0], row[1])

    def _holder(self, conn: sqlite3.Connection, name: str, now: float) -> tuple[float | None, bool]:
        """The holder's remaining TTL (None: the lease is free), and whether the lease
        expired without a release."""
        row = conn.execute(
            "SELECT owner IS NULL, expires_at, boot FROM fencelock_leases WHERE name = ?", (name,)
        ).fetchone()
        if row is None or row[0]:
            return None, False
        _released, expires_at, boot = row
        if boot == self._boot and expires_at > now:
            return float(expires_at) - now, False
        return None, True

    def leave_queue(self, name: str, address: bytes) -> None:
        """Remove a waiter; if the lease is free now, wake the next one in its place."""
        with self._transaction() as conn:
            conn.execute("DELETE FROM fencelock_queue WHERE address = ?", (address,))
            free = (
                conn.execute(
                    f"SELECT 1 FROM fencelock_leases WHERE name = :name AND {_LIVE}",
                    {"name": name, "boot": self._boot, "now": clock.now()},
                ).fetchone()
                is None
            )
        if free:
            self._wake_next(name)

    def _wake_next(self, name: str) -> None:
        """Ring the oldest live waiter that still listens; drop the ones that died."""
        while True:
            with self._mutex, self._translated():
                head, _expired = oldest_live(_Waiters(self._db(), name), clock.now())
            self._saw_waiters(name, head is not None)
            if head is None or self._ringer.ring(head.key):
                return
            with self._transaction() as conn:
                _drop(conn, (head.key,))

    def _saw_waiters(self, name: str, seen: bool) -> None:
        if not seen:
            self.contended.discard(name)
        elif len(self.contended) < _MAX_CONTENDED:
            self.contended.add(name)

    def release(self, name: str, owner: str) -> bool:
        with self._transaction() as conn:
            released = conn.execute(
                f"UPDATE fencelock_leases SET owner = NULL, expires_at = 0 "
                f"WHERE name = :name AND owner = :owner AND {_LIVE}",
                {"name": name, "owner": owner, "boot": self._boot, "now": clock.now()},
            ).rowcount
        if released:
            self._wake_next(name)
        return released == 1

    def renew(self, name: str, owner: str, ttl: float) -> bool:
        return self.renew_many([(name, owner, ttl)])[0]

    def renew_many(self, renewals: Sequence[Renewal]) -> list[bool]:
        """Compare-and-extend each, all in one transaction."""
        with self._transaction() as conn:
            now = clock.now()
            return [
                conn.execute(
                    f"UPDATE fencelock_leases SET expires_at = :expires_at "
                    f"WHERE name = :name AND owner = :owner AND {_LIVE}",
                    {
                        "name": name,
                        "owner": owner,
                        "boot": self._boot,
                        "now": now,
                        "expires_at": now + ttl,
                    },
                ).rowcount
                == 1
                for name, owner, ttl in renewals
            ]

    def inspect(self, name: str) -> LockInfo | None:
        with self._mutex, self._translated():
            conn = self._db()
            row = conn.execute(
                f"SELECT {_INFO_COLUMNS} FROM fencelock_leases WHERE name = ?",
                (name,),
            ).fetchone()
            if row is None:
                return None
            (waiters,) = conn.execute(
                "SELECT count(*) FROM fencelock_queue WHERE name = ?", (name,)
            ).fetchone()
        return self._info(row, clock.now(), int(waiters))

    def waiters(self, name: str) -> builtins.list[str]:
        """The owners of ``name``'s live waiters, in arrival order ("" for an older
        fencelock's, which recorded none)."""
        with self._mutex, self._translated():
            rows = (
                self._db()
                .execute(
                    "SELECT owner FROM fencelock_queue WHERE name = ? AND alive_until > ?"
                    " ORDER BY seq",
                    (name, clock.now()),
                )
                .fetchall()
            )
        return [owner or "" for (owner,) in rows]

    def list(self, prefix: str) -> list[LockInfo]:
        pattern = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        with self._mutex, self._translated():
            conn, now = self._db(), clock.now()
            rows = conn.execute(
                f"SELECT {_INFO_COLUMNS} FROM fencelock_leases "
                f"WHERE name LIKE :pattern ESCAPE '\\' AND {_LIVE} ORDER BY name",
                {"pattern": pattern, "boot": self._boot, "now": now},
            ).fetchall()
        return [self._info(row, now, None) for row in rows]

    def _info(
        self,
        row: tuple[str, str | None, int, float, str, float | None],
        now: float,
        waiters: int | None,
    ) -> LockInfo:
        name, owner, token, expires_at, boot, since = row
        live = owner is not None and boot == self._boot and expires_at > now
        return LockInfo(
            name=name,
            owner=owner if live else None,
            token=int(token),
            remaining=expires_at - now if live else None,
            waiters=waiters,
            since=since if live else None,
        )

    def close(self) -> None:
        with self._mutex:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
        self._ringer.close()
