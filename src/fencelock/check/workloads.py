"""The check clients: each one a process that takes the lock and touches the resource.

The *resource* is an SQLite file in the run directory, independent of the lock
backend under test. Every accepted write also appends a row to ``commits``
(``seq INTEGER PRIMARY KEY AUTOINCREMENT``) in the same transaction, and the
write's ``value`` in the history is that sequence number: the order in which
the resource really committed the writes.

Workloads (one lease = one read-modify-write):

* ``register``: read an integer, work, write it + 1. A lost update shows up as
  a final value below the number of accepted writes.
* ``seats``: read the first free seat of a show, work, sell it. A seat sold
  twice shows up as two accepted writes of ``seat:N``.
* ``election``: the register, written by whoever leads (``client.election``): each
  client campaigns, and while it leads does one read-modify-write with its term as
  the token, then resigns. Two leaders that both wrote lose an update, unless the
  stale one's write is fenced.
* ``semaphore``: a pool of two places; each holder counts who is inside as it enters.
* ``barrier``: rounds of ``client.barrier(f"{name}/{round}", clients)``; each client
  records its arrival in the resource before it arrives, and on passing counts the
  round's recorded arrivals in the same transaction as it records the pass. A party
  that passed before every party had arrived shows up as a pass with fewer arrivals.
  (A replacement of a killed client joins the latest round: it is a party too.)

With fencing, **the read goes through the fence as well as the write**
(``sqlite_fence(..., allow_equal=True)`` in the read's transaction, then again
in the write's). Fencing only the write is not enough for a read-modify-write:
a holder whose lease was lost (after a clock jump, say) can still get its write
in *between* the new holder's read and write, with a token the fence has not
seen beaten yet, and one update is lost. Fencing the read too makes the new
holder's token known to the resource before it acts, so every write of the old
holder after that is refused.

An acquire that times out only because the run's deadline cut its wait short is
not recorded: it says nothing about the lock.

A client tells the runner what it is doing on stdout, one word and a token per
line (``A`` acquired, ``H`` in the critical section between the check and the
write, ``W`` wrote, ``L`` lost, ``R`` released), so nemeses can aim at a holder.
Run with ``python -m fencelock.check.workloads SPEC_JSON``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import signal
import sqlite3
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

import fencelock
from fencelock import clock
from fencelock.check import orm_resource
from fencelock.check.history import Op, Recorder, Result
from fencelock.engine.backoff import Backoff
from fencelock.engine.outcomes import RenewedAsOf
from fencelock.engine.renewal import Outcome
from fencelock.errors import BackendUnavailable, FencelockError, LeaseLost, LockTimeout, StaleToken
from fencelock.fencing import sqlite_fence
from fencelock.toolkit import resources

WORKLOADS = ("register", "seats", "election", "semaphore", "barrier")
FENCE_WITH = ("guard", "sqlalchemy")  # what checks the resource's fence
SEMAPHORE_PERMITS = 2  # the semaphore workload's pool: 2 holders at most
REGISTER_KEY = "register"
SEATS_KEY = "seats"
BUSY_TIMEOUT_MS = 30_000
START_PATIENCE = 60.0  # seconds a client waits for an unreachable server before it gives up
CONNECT_RETRY = Backoff(0.05, 1.0, spread=0.5)  # between its tries
# How often a client extends its lease (to 0.5-2x its TTL) between read and write, so
# the harness races extend() against the renewer.
EXTEND_CHANCE = 0.3

_SCHEMA = """
CREATE TABLE register (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL);
INSERT INTO register (id, value) VALUES (1, 0);
CREATE TABLE seats (seat INTEGER PRIMARY KEY, buyer TEXT NOT NULL, token INTEGER NOT NULL);
CREATE TABLE inside (client INTEGER PRIMARY KEY, token INTEGER NOT NULL);
CREATE TABLE crowded (client INTEGER NOT NULL, token INTEGER NOT NULL, inside INTEGER NOT NULL);
CREATE TABLE arrivals (
    round INTEGER NOT NULL, client INTEGER NOT NULL, PRIMARY KEY (round, client)
);
CREATE TABLE early (client INTEGER NOT NULL, round INTEGER NOT NULL, arrived INTEGER NOT NULL);
CREATE TABLE parties (value INTEGER NOT NULL);
CREATE TABLE commits (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    client INTEGER NOT NULL, token INTEGER NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
    at REAL NOT NULL
);
"""


@dataclass(frozen=True, kw_only=True)
class ClientSpec:
    """Everything one client process needs, passed as one JSON line on its stdin."""

    client: int
    url: str
    workload: str
    lock_name: str
    resource: str
    history: str
    ttl: float
    work: float
    fencing: bool
    seed: int
    fence_reads: bool = True
    parties: int = 0  # the barrier workload's: how many clients run at once
    fence_with: str = "guard"  # "sqlalchemy": fence() of fencelock.integrations.sqlalchemy

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ClientSpec:
        return cls(**json.loads(text))

    @property
    def on_register(self) -> bool:
        """Whether the resource is the register (the seats otherwise)."""
        return self.workload in ("register", "election")

    @property
    def fence_key(self) -> str:
        return REGISTER_KEY if self.on_register else SEATS_KEY


# --- the resource ------------------------------------------------------------------------


def connect_resource(path: Path | str) -> sqlite3.Connection:
    """An autocommit connection to the resource; transactions are explicit."""
    return resources.connect(path, BUSY_TIMEOUT_MS)


def create_resource(path: Path) -> None:
    """A fresh resource database (register at 0, no seat sold, no fence yet)."""
    with resources.fresh_database(path, connect_resource, _SCHEMA):
        pass


def final_read(path: Path, workload: str) -> tuple[str, str]:
    """The key and value of the run's final read: the register, or a summary of the seats."""
    conn = connect_resource(path)
    try:
        if workload == "semaphore":
            return "pool", _pool_summary(conn)
        if workload == "barrier":
            return "rounds", _rounds_summary(conn)
        if workload != "seats":
            (value,) = conn.execute("SELECT value FROM register WHERE id = 1").fetchone()
            return REGISTER_KEY, str(int(value))
        (sold,) = conn.execute("SELECT count(*) FROM seats").fetchone()
        twice = [
            int(seat)
            for (seat,) in conn.execute(
                "SELECT CAST(substr(key, 6) AS INTEGER) AS seat FROM commits "
                "GROUP BY key HAVING count(*) > 1 ORDER BY seat"
            )
        ]
        (sales,) = conn.execute("SELECT count(*) FROM commits").fetchone()
        summary = {"sold": int(sold), "sales": int(sales), "sold_twice": twice}
        return SEATS_KEY, json.dumps(summary, separators=(",", ":"))
    finally:
        conn.close()


def _pool_summary(conn: sqlite3.Connection) -> str:
    (entries,) = conn.execute("SELECT count(*) FROM commits WHERE key = 'pool'").fetchone()
    crowded = [
        f"client {c} (token {t}) entered with {n} inside"
        for c, t, n in conn.execute("SELECT client, token, inside FROM crowded ORDER BY rowid")
    ]
    summary = {"permits": SEMAPHORE_PERMITS, "entries": int(entries), "crowded": crowded}
    return json.dumps(summary, separators=(",", ":"))


def _rounds_summary(conn: sqlite3.Connection) -> str:
    (passes,) = conn.execute("SELECT count(*) FROM commits WHERE key = 'passed'").fetchone()
    (opened,) = conn.execute(
        "SELECT count(DISTINCT token) FROM commits WHERE key = 'passed'"
    ).fetchone()
    early = [
        f"client {c} passed round {r} with {n} arrived"
        for c, r, n in conn.execute("SELECT client, round, arrived FROM early ORDER BY rowid")
    ]
    (parties,) = conn.execute("SELECT coalesce(max(value), 0) FROM parties").fetchone()
    summary = {
        "parties": int(parties),
        "passes": int(passes),
        "rounds": int(opened),
        "early": early,
    }
    return json.dumps(summary, separators=(",", ":"))


def take_out(path: Path, client: int) -> None:
    """A killed holder is inside no more (the runner calls this at the kill)."""
    conn = connect_resource(path)
    try:
        with resources.write_transaction(conn):
            conn.execute("DELETE FROM inside WHERE client = ?", (client,))
    finally:
        conn.close()


def _fenced_read(conn: sqlite3.Connection, spec: ClientSpec, token: int, query: str) -> int:
    """Run ``query`` (one integer) in a transaction that first passes the fence, if fencing."""
    if not (spec.fencing and spec.fence_reads):
        (value,) = conn.execute(query).fetchone()
        return int(value)
    if spec.fence_with == "sqlalchemy":
        return orm_resource.fenced_read(spec.resource, spec.fence_key, token, query)
    with resources.write_transaction(conn):
        sqlite_fence(conn, spec.fence_key, token, allow_equal=True)
        (value,) = conn.execute(query).fetchone()
    return int(value)


def _commit(
    conn: sqlite3.Connection,
    spec: ClientSpec,
    token: int,
    key: str,
    value: str,
    update: tuple[str, tuple[object, ...]],
) -> int:
    """Apply ``update`` and log the commit in one transaction (fenced); the commit's seq."""
    commit = (spec.client, token, key, value)
    if spec.fencing and spec.fence_with == "sqlalchemy":
        return orm_resource.commit(spec.resource, spec.fence_key, token, update, commit)
    with resources.write_transaction(conn):
        if spec.fencing:
            sqlite_fence(conn, spec.fence_key, token, allow_equal=True)
        conn.execute(*update)
        cursor = conn.execute(orm_resource.COMMIT, (*commit, clock.now()))
        seq = cursor.lastrowid
    assert seq is not None
    return int(seq)


# --- the client process ------------------------------------------------------------------


class Channel:
    """Lines to the runner on stdout, and the history file; both thread-safe."""

    def __init__(self, spec: ClientSpec) -> None:
        self.spec = spec
        self._guard = threading.Lock()
        self._recorder = Recorder(Path(spec.history))

    def say(self, word: str, token: int | None = None) -> None:
        line = word if token is None else f"{word} {token}"
        with self._guard, contextlib.suppress(OSError, ValueError):
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def record(self, op: Op) -> None:
        with self._guard:
            self._recorder.record(op)

    def op(
        self,
        kind: str,
        start: float,
        result: str,
        *,
        token: int | None = None,
        key: str | None = None,
        value: str | None = None,
        detail: str = "",
        end: float | None = None,
    ) -> None:
        self.record(
            Op(
                self.spec.client,
                kind,  # type: ignore[arg-type]
                start,
                clock.now() if end is None else end,
                result,  # type: ignore[arg-type]
                token,
                key,
                value,
                detail,
            )
        )

    def close(self) -> None:
        with self._guard:
            self._recorder.close()


class Taken(Protocol):
    """What a worker takes its lease through: a lock, or an election."""

    def acquire(self, timeout: float | None = None) -> fencelock.Lease: ...

    def release(self, lease: fencelock.Lease) -> None: ...


class ByLock:
    """The lease is the lock's."""

    def __init__(self, lock: fencelock.Lock) -> None:
        self.lock = lock

    def acquire(self, timeout: float | None = None) -> fencelock.Lease:
        return self.lock.acquire(timeout=timeout)

    def release(self, lease: fencelock.Lease) -> None:
        lease.release()


class ByElection:
    """The lease is the leadership's: campaign to take it, resign to give it back."""

    def __init__(self, election: fencelock.Election, value: str) -> None:
        self.election, self.value = election, value
        self._leading: dict[fencelock.Lease, fencelock.Leadership] = {}

    def acquire(self, timeout: float | None = None) -> fencelock.Lease:
        leadership = self.election.campaign(self.value, timeout=timeout)
        self._leading[leadership.lease] = leadership
        return leadership.lease

    def release(self, lease: fencelock.Lease) -> None:
        self._leading.pop(lease).resign()


class ByPermit:
    """The lease is a semaphore permit's."""

    def __init__(self, semaphore: fencelock.Semaphore) -> None:
        self.semaphore = semaphore
        self._held: dict[fencelock.Lease, fencelock.Permit] = {}

    def acquire(self, timeout: float | None = None) -> fencelock.Lease:
        permit = self.semaphore.acquire(timeout=timeout)
        self._held[permit.lease] = permit
        return permit.lease

    def release(self, lease: fencelock.Lease) -> None:
        self._held.pop(lease).release()


class Worker:
    """One client's loop: acquire, read, check, work, write, release, until the deadline."""

    def __init__(self, spec: ClientSpec, lock: Taken, db: sqlite3.Connection, out: Channel) -> None:
        self.spec, self.lock, self.db, self.out = spec, lock, db, out
        self.rng = random.Random(spec.seed * 1_000_003 + spec.client)  # noqa: S311 (a seeded schedule, to replay)
        self.acquire_timeout = max(1.0, 4 * spec.ttl)

    def run(self, deadline: float) -> None:
        while True:
            left = deadline - clock.now()
            if left < 0.02:
                return
            lease = self._acquire(min(self.acquire_timeout, left), left <= self.acquire_timeout)
            if lease is None:
                continue
            try:
                self._step(lease)
            finally:
                self._release(lease)

    def _acquire(self, timeout: float, last: bool) -> fencelock.Lease | None:
        """Take the lease; None if not. ``last``: the run ends at the timeout."""
        start = clock.now()
        try:
            lease = self.lock.acquire(timeout=timeout)
        except LockTimeout as exc:
            if not last:  # a wait cut short by the end of the run is not the lock's fault
                self.out.op("acquire", start, "timeout", detail=str(exc))
            return None
        except FencelockError as exc:
            self.out.op("acquire", start, "error", detail=f"{type(exc).__name__}: {exc}")
            time.sleep(min(self.spec.ttl / 2, 0.2))  # a dead server: do not spin
            return None
        self.out.op("acquire", start, "ok", token=lease.token)
        lease.on_lost(self._lost)
        _record_renewals(lease, self.out)
        self.out.say("A", lease.token)
        return lease

    def _lost(self, lease: fencelock.Lease) -> None:
        now = clock.now()
        reason = lease.lost_reason or "lost"
        self.out.op("lost", now, "info", token=lease.token, detail=reason, end=now)
        self.out.say("L", lease.token)

    def _step(self, lease: fencelock.Lease) -> None:
        """One read-modify-write under ``lease``; the pause window is between check and write."""
        if self.spec.workload == "semaphore":
            self._visit_pool(lease)
            return
        token, spec = lease.token, self.spec
        start = clock.now()
        query = (
            "SELECT value FROM register WHERE id = 1"
            if spec.on_register
            else "SELECT coalesce(max(seat), 0) + 1 FROM seats"
        )
        key = REGISTER_KEY if spec.on_register else None
        try:
            read = _fenced_read(self.db, spec, token, query)
        except StaleToken as exc:
            self.out.op("write", start, "stale", token=token, key=key, detail=f"read: {exc}")
            self.out.say("W stale")
            return
        except sqlite3.Error as exc:
            self.out.op("write", start, "error", token=token, key=key, detail=f"read: {exc}")
            return
        self._maybe_extend(lease)
        try:
            lease.check()  # a careful client: the lease is fine *now* ...
        except LeaseLost:
            return
        self.out.say("H", token)  # ... and this is where a pause hurts
        time.sleep(spec.work * self.rng.uniform(0.5, 1.5))
        self._write(token, read)

    def _visit_pool(self, lease: fencelock.Lease) -> None:
        """Enter the pool (counting who is inside), work, leave; a pause hurts inside."""
        token, client = lease.token, self.spec.client
        start = clock.now()
        try:
            with resources.write_transaction(self.db):
                (inside,) = self.db.execute("SELECT count(*) FROM inside").fetchone()
                if inside >= SEMAPHORE_PERMITS:
                    self.db.execute(
                        "INSERT INTO crowded (client, token, inside) VALUES (?, ?, ?)",
                        (client, token, inside),
                    )
                self.db.execute("INSERT OR REPLACE INTO inside VALUES (?, ?)", (client, token))
                seq = self.db.execute(
                    "INSERT INTO commits (client, token, key, value, at) VALUES (?, ?, ?, ?, ?)",
                    (client, token, "pool", str(inside), clock.now()),
                ).lastrowid
        except sqlite3.Error as exc:
            self.out.op("write", start, "error", token=token, key="pool", detail=str(exc))
            self.out.say("W error")
            return
        detail = f"entered with {inside} inside"
        self.out.op(
            "write", start, "accepted", token=token, key="pool", value=str(seq), detail=detail
        )
        self.out.say("W accepted")
        self.out.say("H", token)
        time.sleep(self.spec.work * self.rng.uniform(0.5, 1.5))
        with contextlib.suppress(sqlite3.Error), resources.write_transaction(self.db):
            self.db.execute("DELETE FROM inside WHERE client = ?", (client,))

    def _maybe_extend(self, lease: fencelock.Lease) -> None:
        """Now and then extend the lease, shorter or longer, racing the renewer."""
        if self.rng.random() >= EXTEND_CHANCE:
            return
        ttl = self.spec.ttl * self.rng.uniform(0.5, 2.0)
        start = clock.now()
        try:
            lease.extend(ttl)
        except LeaseLost as exc:
            self.out.op("extend", start, "lost", token=lease.token, detail=str(exc))
            return
        except FencelockError as exc:
            detail = f"{type(exc).__name__}: {exc}"
            self.out.op("extend", start, "error", token=lease.token, detail=detail)
            return
        self.out.op("extend", start, "ok", token=lease.token, detail=f"to {ttl:.3f}s")

    def _write(self, token: int, read: int) -> None:
        spec = self.spec
        if spec.on_register:
            key, value = REGISTER_KEY, str(read + 1)
            update: tuple[str, tuple[object, ...]] = (
                "UPDATE register SET value = ? WHERE id = 1",
                (read + 1,),
            )
            detail = f"read {read}, wrote {read + 1}"
        else:
            key, value = f"seat:{read}", f"client-{spec.client}"
            update = (
                "INSERT INTO seats (seat, buyer, token) VALUES (?, ?, ?) ON CONFLICT (seat) "
                "DO UPDATE SET buyer = excluded.buyer, token = excluded.token",
                (read, value, token),
            )
            detail = f"sold seat {read} to {value}"
        start = clock.now()
        try:
            seq = _commit(self.db, spec, token, key, value, update)
        except StaleToken as exc:
            self.out.op("write", start, "stale", token=token, key=key, detail=str(exc))
            self.out.say("W stale")
            return
        except sqlite3.Error as exc:
            self.out.op("write", start, "error", token=token, key=key, detail=str(exc))
            self.out.say("W error")
            return
        self.out.op("write", start, "accepted", token=token, key=key, value=str(seq), detail=detail)
        self.out.say("W accepted")

    def _release(self, lease: fencelock.Lease) -> None:
        start = clock.now()
        result: Result = "ok"
        detail = ""
        try:
            self.lock.release(lease)
        except LeaseLost as exc:
            result, detail = "lost", str(exc)
        except FencelockError as exc:
            result, detail = "error", f"{type(exc).__name__}: {exc}"
        self.out.op("release", start, result, token=lease.token, detail=detail)
        self.out.say("R", lease.token)


def _record_renewals(lease: fencelock.Lease, out: Channel) -> None:
    """Record each renewal or extension the server grants ``lease`` (a ``renew`` op).

    The library has no hook for it: ``_settle``, the one place a lease's trusted time
    moves, is wrapped on this lease alone, recording after the library has settled.
    """
    settle = lease._settle

    def settled(started: float, ttl: float, outcome: Outcome) -> None:
        settle(started, ttl, outcome)
        if outcome is True or isinstance(outcome, RenewedAsOf):
            since = started if outcome is True else min(started, outcome.at)
            with contextlib.suppress(OSError, ValueError):  # the history closed at the end
                out.op("renew", since, "ok", token=lease.token, detail=f"to {ttl:.3f}s")

    lease._settle = settled  # type: ignore[method-assign]


class BarrierWorker:
    """One client's rounds at the barrier: record the arrival, arrive, and on passing
    count the round's recorded arrivals as the pass is recorded."""

    def __init__(
        self, spec: ClientSpec, client: fencelock.Client, db: sqlite3.Connection, out: Channel
    ) -> None:
        self.spec, self.client, self.db, self.out = spec, client, db, out
        self.rng = random.Random(spec.seed * 1_000_003 + spec.client)  # noqa: S311 (a seeded schedule, to replay)
        self.wait_timeout = max(1.0, 4 * spec.ttl)

    def run(self, deadline: float) -> None:
        with resources.write_transaction(self.db):
            self.db.execute("INSERT INTO parties (value) VALUES (?)", (self.spec.parties,))
            (round_,) = self.db.execute("SELECT coalesce(max(round), 0) FROM arrivals").fetchone()
        while (left := deadline - clock.now()) >= 0.02:
            self._round(int(round_), min(self.wait_timeout, left), left <= self.wait_timeout)
            round_ += 1

    def _round(self, round_: int, timeout: float, last: bool) -> None:
        spec, start = self.spec, clock.now()
        with resources.write_transaction(self.db):
            self.db.execute("INSERT OR IGNORE INTO arrivals VALUES (?, ?)", (round_, spec.client))
        self.out.say("A", round_)
        barrier = self.client.barrier(f"{spec.lock_name}/{round_}", spec.parties)
        try:
            passed = barrier.wait(timeout)
        except FencelockError as exc:
            self.out.op(
                "acquire", start, "error", token=round_, detail=f"{type(exc).__name__}: {exc}"
            )
            time.sleep(min(spec.ttl / 2, 0.2))  # a dead server: do not spin
            return
        if not passed:
            if not last:  # a wait cut short by the end of the run says nothing
                self.out.op("acquire", start, "timeout", token=round_, detail="barrier wait")
            self.out.say("R", round_)
            return
        self.out.op("acquire", start, "ok", token=round_, detail=f"round {round_} opened")
        self._passed(round_)
        self.out.say("H", round_)
        time.sleep(spec.work * self.rng.uniform(0.5, 1.5))
        self.out.say("R", round_)

    def _passed(self, round_: int) -> None:
        spec, start = self.spec, clock.now()
        with resources.write_transaction(self.db):
            (arrived,) = self.db.execute(
                "SELECT count(*) FROM arrivals WHERE round = ?", (round_,)
            ).fetchone()
            if arrived < spec.parties:
                self.db.execute(
                    "INSERT INTO early VALUES (?, ?, ?)", (spec.client, round_, arrived)
                )
            seq = self.db.execute(
                "INSERT INTO commits (client, token, key, value, at) VALUES (?, ?, ?, ?, ?)",
                (spec.client, round_, "passed", str(arrived), clock.now()),
            ).lastrowid
        detail = f"passed round {round_} with {arrived} of {spec.parties} arrived"
        self.out.op(
            "write", start, "accepted", token=round_, key="passed", value=str(seq), detail=detail
        )
        self.out.say("W accepted")


def _taken(client: fencelock.Client, spec: ClientSpec) -> Taken:
    """What the workload takes its leases through."""
    if spec.workload == "election":
        return ByElection(client.election(spec.lock_name, ttl=spec.ttl), f"c{spec.client}")
    if spec.workload == "semaphore":
        pool = client.semaphore(spec.lock_name, permits=SEMAPHORE_PERMITS, ttl=spec.ttl)
        return ByPermit(pool)
    return ByLock(client.lock(spec.lock_name, ttl=spec.ttl, renew=True))


def _connect(spec: ClientSpec) -> fencelock.Client:
    """A client of ``spec.url``, retried while the server is unreachable.

    A replacement client may start while a nemesis has the server down (paused,
    restarting, cut off): it waits for the server as a user's waiter would, for at
    most ``START_PATIENCE`` plus the longest outage a nemesis makes (a few TTLs).
    A wrong URL or password fails at once.
    """
    give_up = clock.now() + START_PATIENCE + 4 * spec.ttl
    pauses = CONNECT_RETRY.waits(random.random)
    while True:
        try:
            return fencelock.connect(spec.url)
        except BackendUnavailable:
            pause = next(pauses)
            if clock.now() + pause > give_up:
                raise
        time.sleep(pause)


def _exit_when_orphaned() -> None:
    """The runner holds our stdin open; when it is gone, so are we."""
    with contextlib.suppress(OSError, ValueError):
        sys.stdin.buffer.read()
    os._exit(3)


def main() -> int:
    """Process entry point: read the spec, ``ready``, wait for ``go DEADLINE``, run until then.

    The spec (backend URL included) comes on stdin, never on the command line, which
    any user can read; the one argument, the history path, only names the run in ``ps``.
    """
    spec = ClientSpec.from_json(sys.stdin.readline())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the runner's to handle
    logging.getLogger("fencelock").addHandler(logging.NullHandler())
    logging.getLogger("fencelock").propagate = False
    out = Channel(spec)
    db = connect_resource(spec.resource)
    try:
        with _connect(spec) as client:
            worker = (
                BarrierWorker(spec, client, db, out)
                if spec.workload == "barrier"
                else Worker(spec, _taken(client, spec), db, out)
            )
            out.say("ready")
            go = sys.stdin.readline().split()
            if len(go) != 2 or go[0] != "go":
                return 3
            threading.Thread(target=_exit_when_orphaned, daemon=True).start()
            worker.run(float(go[1]))
    finally:
        db.close()
        out.close()
    out.say("bye")
    return 0


if __name__ == "__main__":
    sys.exit(main())
