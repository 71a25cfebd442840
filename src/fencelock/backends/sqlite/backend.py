"""``sqlite:///path``: the embedded default, for many processes on one host.

One row per lock name holds the owner, the last token and the expiry. Taking
the lease and issuing its token is one ``INSERT ... ON CONFLICT DO UPDATE``
inside one write transaction, so tokens never repeat; the row outlives release
and expiry, and the file outlives restarts, so tokens never go backwards.

Expiry is measured on the host's boot-time clock (:mod:`fencelock.clock`). The row
records the boot and time namespace that clock belongs to, and the lease's TTL: a row
written on another clock (another boot, host or time namespace) is expired only once
it has been seen unchanged for its TTL on ours, and a holder is taken for dead only
on positive proof (:mod:`.liveness`).

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
import dataclasses
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from fencelock import forking
from fencelock.backends.base import Acquired, AttemptResult, Busy, Capabilities, LockInfo, Renewal
from fencelock.backends.sqlite import liveness
from fencelock.backends.sqlite.wakeup_socket import WakeupSender, WakeupSocket
from fencelock.engine import barging
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
CREATE TABLE IF NOT EXISTS fencelock_observed (
    name TEXT NOT NULL,
    observer TEXT NOT NULL,
    owner TEXT NOT NULL,
    token INTEGER NOT NULL,
    expires_at REAL NOT NULL,
    seen REAL NOT NULL,
    PRIMARY KEY (name, observer)
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
# the lease was taken in) with taking a crashed holder's lease at once (:mod:`.liveness`);
# the TTL, the time namespace, the taker's PID and start ticks with proving that death
# (and reading only our own clock's expiries). ``facts`` is the token those four describe:
# an older fencelock that takes the lease leaves them describing the holder before it.
# The queue's ``clock`` (which clock its times are on) came with that too.
_ADDED_COLUMNS = {
    "fencelock_queue": {
        "arrived": "REAL NOT NULL DEFAULT 0",
        "alive_until": "REAL NOT NULL DEFAULT 0",
        "owner": "TEXT",
        "clock": "TEXT",
    },
    "fencelock_leases": {
        "since": "REAL",
        "pidns": "TEXT",
        "ttl": "REAL",
        "timens": "TEXT",
        "pid": "INTEGER",
        "start_ticks": "INTEGER",
        "facts": "INTEGER",
    },
}

# A waiter's times are on its own clock: only the waiters on ours are judged by them
# (kept for, passed over, dropped); one on another clock only asks, as a newcomer does,
# and can neither hold a free lease back nor be dropped by a clock we cannot read. The
# clock of an older fencelock's waiter, or one where it is unknown, is NULL: the host's.
_OURS = "(clock IS NULL OR clock = :clock)"

_QUEUE = f"""
SELECT address, arrived, alive_until FROM fencelock_queue WHERE name = :name AND {_OURS}
ORDER BY seq
"""  # noqa: S608 (constant fragments; values are parameters)

_JOIN = """
INSERT INTO fencelock_queue (name, address, arrived, alive_until, owner, clock)
VALUES (:name, :address, :now, :alive_until, :owner, :clock)
ON CONFLICT (address) DO UPDATE SET alive_until = excluded.alive_until
"""

# Free (released) leases only, or the one ``taken``: the holder whose lease expired or
# who died, as :mod:`.liveness` judged it in the same transaction.
_TAKE = """
INSERT INTO fencelock_leases
    (name, owner, token, expires_at, boot, since, pidns, ttl, timens, pid, start_ticks, facts)
VALUES (:name, :owner, 1, :expires_at, :boot, :since, :pidns, :ttl, :timens, :pid,
    :start_ticks, 1)
ON CONFLICT (name) DO UPDATE SET
    owner = excluded.owner, token = token + 1, expires_at = excluded.expires_at,
    boot = excluded.boot, since = excluded.since, pidns = excluded.pidns,
    ttl = excluded.ttl, timens = excluded.timens, pid = excluded.pid,
    start_ticks = excluded.start_ticks, facts = token + 1
WHERE owner IS NULL OR owner = :taken
RETURNING token
"""

# The caller's own lease, on the clock it wrote it on (only its own process has its owner).
_HELD_BY = "owner = :owner AND boot = :boot AND timens IS :timens AND expires_at > :now"

# A lease's row, with when an observer on our clock first saw it as it is now.
_ROWS = """
SELECT l.name, l.since, l.owner, l.token, l.expires_at, l.boot, l.facts, l.ttl, l.timens,
    l.pidns, l.pid, l.start_ticks, o.seen
FROM fencelock_leases AS l LEFT JOIN fencelock_observed AS o
    ON o.name = l.name AND o.observer = :observer AND o.owner = l.owner
    AND o.token = l.token AND o.expires_at = l.expires_at
"""

_OBSERVE = """
INSERT INTO fencelock_observed (name, observer, owner, token, expires_at, seen)
VALUES (:name, :observer, :owner, :token, :expires_at, :now)
ON CONFLICT (name, observer) DO UPDATE SET owner = excluded.owner,
    token = excluded.token, expires_at = excluded.expires_at, seen = excluded.seen
"""

# Other observers' sightings of a row that has changed since restart anyway.
_FORGET = """
DELETE FROM fencelock_observed WHERE name = :name AND observer != :observer
AND NOT (owner = :owner AND token = :token AND expires_at = :expires_at)
"""

_MAX_CONTENDED = 1024

_UNKNOWN_BOOT = "unknown-boot"

_Row = tuple[str, float | None, liveness.Recorded]


def _recorded(row: tuple[Any, ...]) -> _Row:
    """A row of :data:`_ROWS`: its name, its grant's Unix time, and what it records."""
    name, since, owner, token, expires_at, boot, facts, ttl, timens, pidns, pid, ticks, seen = row
    if facts != token:  # an older fencelock's: only what it wrote is its
        ttl = timens = pid = ticks = None
    recorded = liveness.Recorded(
        owner, int(token), float(expires_at), boot, ttl, timens, pidns, pid, ticks, seen
    )
    return name, since, recorded


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

    def __init__(self, conn: sqlite3.Connection, name: str, clock: str | None) -> None:
        self._conn, self._name, self._clock = conn, name, clock

    def __iter__(self) -> Iterator[barging.Waiter[bytes]]:
        cursor = self._conn.execute(_QUEUE, {"name": self._name, "clock": self._clock})
        try:
            for address, arrived, alive in cursor:
                yield barging.Waiter(bytes(address), float(arrived), float(alive))
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
        held = self._backend.held(self._name)
        if held is not None and self._backend.crashed(held):
            return
        exited = None if held is None else self._backend.exit_notice(held)
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

    capabilities = Capabilities(
        fair=True,
        renews_in_batches=True,
    )

    def outlives_client(self, renewed: bool) -> bool:
        """Whether a lease left to its TTL stays on the server after the client closes."""
        return True

    def __init__(self, parsed: ParsedURL, host: liveness.Host | None = None) -> None:
        reject_unknown_options(parsed, COMMON_OPTIONS | {"busy_timeout"})
        self.url = parsed.redacted
        self.request_bound = parsed.request_bound
        self.path = database_path(parsed)
        # timeout: how long one statement waits for the file's write lock (busy_timeout
        # is its older name); connect_timeout: how long opening the file may take.
        self._busy_timeout = number_option(
            parsed, "timeout", number_option(parsed, "busy_timeout", 10.0)
        )
        self._connect_timeout = number_option(parsed, "connect_timeout", self._busy_timeout)
        self._host: liveness.Host = host or liveness.ProcHost()
        # This process's facts and the observer it records sightings as: read on first
        # use, again after a fork (another PID and start, perhaps other namespaces).
        self._facts: tuple[liveness.Here, str] | None = None
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
        self._facts = None
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
        return SQLiteAttempt(self, name, owner, ttl, barging.starvation_bound(fair), renewed)

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
        here = self._here()
        with self._transaction() as conn:
            now = self._host.now()
            verdict = barging.handoff(_Waiters(conn, name, here.clock), doorbell, now, bound)
            _drop(conn, verdict.expired)
            held: liveness.Recorded | None = None
            if verdict.may_take:
                params = self._written(here) | {"name": name, "owner": owner, "ttl": ttl}
                params |= {"expires_at": now + ttl, "since": time.time(), "taken": None}
                # A renewed lease lives as long as its process: recorded with the PID
                # namespace, it is taken at once once that process is proven gone. One not
                # renewed is meant to last its TTL, whoever exits (run-once's at_least).
                if not renewed:
                    params["pidns"] = None
                row = conn.execute(_TAKE, params).fetchone()
                if row is None:  # held, or expired or its holder gone: as seen from here?
                    held = self._row(conn, name)
                    if held is not None and self._takeable(held, now):
                        params["taken"] = held.owner
                        row = conn.execute(_TAKE, params).fetchone()
                if row is not None:
                    if doorbell is not None:
                        conn.execute("DELETE FROM fencelock_queue WHERE address = ?", (doorbell,))
                    return Acquired(int(row[0]))
            if doorbell is not None:
                params = {"name": name, "address": doorbell, "now": now, "owner": owner}
                params |= {"alive_until": barging.alive_until(now), "clock": here.clock}
                conn.execute(_JOIN, params)
            remaining, expired = self._look(conn, name, held, now)
        self._saw_waiters(name, True)
        if expired and verdict.kept_for is not None:
            self._wake(name, verdict.kept_for.key)
        return Busy(barging.busy_wait(remaining))

    def _here(self) -> liveness.Here:
        """This process's facts, read once (again in a forked child)."""
        return (self._facts or self._read_facts())[0]

    def _observer(self) -> str:
        """Who records sightings here: our clock, shared by every process reading it;
        where that clock is unknown, this backend alone."""
        return (self._facts or self._read_facts())[1]

    def _read_facts(self) -> tuple[liveness.Here, str]:
        here = liveness.Here.of(self._host)
        self._facts = (here, here.clock or f"process {secrets.token_hex(8)}")
        return self._facts

    def _written(self, here: liveness.Here) -> dict[str, object]:
        """The columns saying where a lease is taken or renewed, as this process writes them."""
        return {
            "boot": here.boot or _UNKNOWN_BOOT,
            "timens": here.timens,
            "pidns": here.pidns,
            "pid": here.pid,
            "start_ticks": here.start_ticks,
        }

    def _row(self, conn: sqlite3.Connection, name: str) -> liveness.Recorded | None:
        """What ``name``'s row records (None: never taken)."""
        found = conn.execute(
            f"{_ROWS} WHERE l.name = :name", {"name": name, "observer": self._observer()}
        ).fetchone()
        return None if found is None else _recorded(found)[2]

    def _takeable(self, row: liveness.Recorded, now: float) -> bool:
        """Whether a held ``row`` may be taken from here: it expired, or its holder died."""
        return liveness.remaining(row, self._here(), now) is None or self.crashed(row)

    def crashed(self, row: liveness.Recorded) -> bool:
        """Whether ``row``'s holder is proven gone (a /proc read only where it can be)."""
        here = self._here()
        if not liveness.judged_here(row, here) or row.pid is None:
            return False
        return liveness.dead(row, here, self._host.process(row.pid))

    def exit_notice(self, row: liveness.Recorded) -> int | None:
        """A pidfd readable when ``row``'s holder exits, if its exit would prove it gone."""
        if not liveness.judged_here(row, self._here()):
            return None
        assert row.pid is not None and row.start_ticks is not None
        return self._host.exit_notice(row.pid, row.start_ticks)

    def _look(
        self, conn: sqlite3.Connection, name: str, row: liveness.Recorded | None, now: float
    ) -> tuple[float | None, bool]:
        """The holder's remaining TTL as seen from here (None: the lease is free), and
        whether the lease expired without a release. A row on another clock is observed:
        its first sighting as it is now starts the TTL it must stay unchanged for."""
        if row is None:
            row = self._row(conn, name)
        if row is None or row.owner is None:
            return None, False
        here = self._here()
        if row.seen is None and not liveness.shares_clock(row, here):
            sighting: dict[str, object] = {"name": name, "observer": self._observer()}
            sighting |= {"owner": row.owner, "token": row.token}
            sighting |= {"expires_at": row.expires_at, "now": now}
            conn.execute(_OBSERVE, sighting)
            conn.execute(_FORGET, sighting)
            row = dataclasses.replace(row, seen=now)
        remaining = liveness.remaining(row, here, now)
        return remaining, remaining is None

    def _wake(self, name: str, address: bytes) -> None:
        """Ring the waiter a lease that expired is kept for (a release would have rung
        it; an expiry rang nobody); if its process is gone, pass the lease on.

        Only once our transaction is over: woken while we still held the write lock, the
        waiter would meet SQLITE_BUSY, whose handler sleeps at least a millisecond."""
        if not self._ringer.ring(address):
            with self._transaction() as conn:
                _drop(conn, (address,))
            self._wake_next(name)

    def leave_to_ttl(self, name: str, owner: str) -> None:
        """The holder leaves its lease to its TTL (``expire_in``): it may exit now, and
        the lease stays taken until then."""
        with self._transaction() as conn:
            conn.execute(
                "UPDATE fencelock_leases SET pidns = NULL WHERE name = ? AND owner = ?",
                (name, owner),
            )

    def held(self, name: str) -> liveness.Recorded | None:
        """What ``name``'s row records if its lease is held as seen from here."""
        with self._mutex, self._translated():
            row = self._row(self._db(), name)
        if row is None or liveness.remaining(row, self._here(), self._host.now()) is None:
            return None
        return row

    def leave_queue(self, name: str, address: bytes) -> None:
        """Remove a waiter; if the lease is free now, wake the next one in its place."""
        with self._transaction() as conn:
            conn.execute("DELETE FROM fencelock_queue WHERE address = ?", (address,))
            row = self._row(conn, name)
            now = self._host.now()
            free = row is None or liveness.remaining(row, self._here(), now) is None
        if free:
            self._wake_next(name)

    def _wake_next(self, name: str) -> None:
        """Ring the oldest live waiter that still listens; drop the ones that died."""
        clock = self._here().clock
        while True:
            with self._mutex, self._translated():
                head, _expired = barging.oldest_live(
                    _Waiters(self._db(), name, clock), self._host.now()
                )
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
        written = self._written(self._here())
        with self._transaction() as conn:
            released = conn.execute(
                f"UPDATE fencelock_leases SET owner = NULL, expires_at = 0 "  # noqa: S608 (constant fragments; values are parameters)
                f"WHERE name = :name AND {_HELD_BY}",
                {"name": name, "owner": owner, "now": self._host.now()} | written,
            ).rowcount
        if released:
            self._wake_next(name)
        return released == 1

    def renew(self, name: str, owner: str, ttl: float) -> bool:
        return self.renew_many([(name, owner, ttl)])[0]

    def renew_many(self, renewals: Sequence[Renewal]) -> list[bool]:
        """Compare-and-extend each, all in one transaction."""
        written = self._written(self._here())
        with self._transaction() as conn:
            now = self._host.now()
            return [
                conn.execute(
                    f"UPDATE fencelock_leases SET expires_at = :expires_at, ttl = :ttl "  # noqa: S608 (constant fragments; values are parameters)
                    f"WHERE name = :name AND {_HELD_BY}",
                    {"name": name, "owner": owner, "now": now, "ttl": ttl}
                    | {"expires_at": now + ttl}
                    | written,
                ).rowcount
                == 1
                for name, owner, ttl in renewals
            ]

    def inspect(self, name: str) -> LockInfo | None:
        observer = self._observer()
        with self._mutex, self._translated():
            conn = self._db()
            row = conn.execute(
                f"{_ROWS} WHERE l.name = :name", {"name": name, "observer": observer}
            ).fetchone()
            if row is None:
                return None
            (waiters,) = conn.execute(
                "SELECT count(*) FROM fencelock_queue WHERE name = ?", (name,)
            ).fetchone()
        return self._info(_recorded(row), self._host.now(), int(waiters))

    def waiters(self, name: str) -> builtins.list[str]:
        """The owners of ``name``'s live waiters, in arrival order ("" for an older
        fencelock's, which recorded none); a waiter on another clock counts as live."""
        clock = self._here().clock
        with self._mutex, self._translated():
            rows = (
                self._db()
                .execute(
                    f"SELECT owner FROM fencelock_queue WHERE name = :name"  # noqa: S608 (constant fragments; values are parameters)
                    f" AND (alive_until > :now OR NOT {_OURS}) ORDER BY seq",
                    {"name": name, "now": self._host.now(), "clock": clock},
                )
                .fetchall()
            )
        return [owner or "" for (owner,) in rows]

    def list(self, prefix: str) -> list[LockInfo]:
        pattern = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        observer = self._observer()
        with self._mutex, self._translated():
            rows = (
                self._db()
                .execute(
                    f"{_ROWS} WHERE l.name LIKE :pattern ESCAPE '\\' AND l.owner IS NOT NULL "
                    "ORDER BY l.name",
                    {"pattern": pattern, "observer": observer},
                )
                .fetchall()
            )
        now = self._host.now()
        infos = [self._info(_recorded(row), now, None) for row in rows]
        return [info for info in infos if info.held]

    def _info(self, row: _Row, now: float, waiters: int | None) -> LockInfo:
        name, since, recorded = row
        remaining = liveness.remaining(recorded, self._here(), now)
        live = remaining is not None
        return LockInfo(
            name=name,
            owner=recorded.owner if live else None,
            token=recorded.token,
            remaining=remaining,
            waiters=waiters,
            since=since if live else None,
        )

    def close(self) -> None:
        with self._mutex:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
        self._ringer.close()
