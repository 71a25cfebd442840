"""PostgreSQL and MySQL/MariaDB locks: fencelock beside tooz's SQL drivers, in one run.

Run with ``.venv/bin/python bench/sql_bench.py`` (``--quick`` for a ~45 s smoke run). It
starts its own PostgreSQL 15 and MariaDB 10.11 (``fencelock.testing.ServerPool``) and
measures, reported as ratios:

1. **Uncontended** acquire+release cycles/s in one process on one name: fencelock
   ``postgresql://`` (lease table) and ``postgresql+advisory://`` (session advisory
   locks), tooz's ``pgsql`` driver, and two raw psycopg loops as floors; on MariaDB,
   fencelock ``mysql://``, tooz's ``mysql`` driver and two raw PyMySQL loops (a
   fencelock without ``mysql://`` skips its rows and marks its targets pending:
   :func:`fencelock_has_mysql`).
2. **Contended**: N processes (default 8) loop acquire -> hold 1 ms -> release on one
   name (the harness's workers): critical sections/s, handoff latency (release call ->
   next acquire return), how often the longest waiter got the lock next (FIFO), Jain's
   fairness, starved workers, overlaps (by the clock, and by a marker file each holder
   creates with ``O_EXCL``), fencing-token order.
3. **Row updates** under N contending writers on one counter row:
   ``fencelock.sql.optimistic_update`` (a version column, retried with backoff) beside
   ``fencelock.sql.for_update`` (``SELECT ... FOR UPDATE``): updates/s, retries per
   update, and a lost-update check (the counter against the updates that returned).
4. **tooz's 16-bit keys**: tooz's PostgreSQL driver locks ``pg_advisory_lock(k1, k2)``
   with ``k1, k2 = md5(name)[0:2]`` (65,536 keys). Two distinct names with the same two
   bytes are found by brute force, and the check shows they block each other under tooz
   and not under fencelock.

It prints tables (rich), writes ``bench/results/sql-<timestamp>.json`` and a Markdown
copy of the tables beside it. Peers that cannot be imported are reported and skipped
(tooz's PostgreSQL driver needs ``psycopg2``; its MySQL one PyMySQL).
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import itertools
import math
import os
import statistics
import sys
import tempfile
import time
import uuid
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.cli import RunSettings, add_contended, contended_ok, parser
from harness.lockers import FencelockLocker, PeerLocker, acquire_release, fencelock_cycle
from harness.peers import peer_versions, say
from harness.results import environment, noise_warnings, write_results
from harness.rounds import RateResult, Runner, SyncRunner, interleave
from harness.servers import server_pool
from harness.stats import Summary, jain, ratio, summarise, summary_ms
from harness.tables import (
    FAIRNESS,
    HANDOFF_COUNT,
    HANDOFFS,
    LOCK,
    SELF_REACQUIRE,
    TOKENS_AND_ERRORS,
    WAKES,
    Column,
    Target,
    at_least,
    at_most,
    console,
    fmt_ms,
    fmt_number,
    fmt_rate,
    fmt_ratio,
    fmt_rounds,
    new_table,
    print_errors,
    rows_table,
    targets_table,
    waits,
)
from harness.workers import ACQUIRE_TIMEOUT, Locker, WorkerReport, run_contended
from rich.table import Table

import fencelock
from fencelock import clock

TTL = 30.0  # uncontended leases (renewed)
CONTENDED_TTL = 10.0
LOCK_NAME = "bench/sql"
BATCH = 10  # uncontended cycles between two clock reads
STARVED_SHARE = 0.10  # a worker with fewer sections than this share of the mean is starved
COUNTER_TABLE = "bench_counter"
GAVE_UP = -1  # an update's "token" when optimistic_update raised ConflictError
COLLISION_NAMES = 5_000  # names tried for a tooz key collision (~300 give even odds)
PROBE_TIMEOUT = 1.0  # the collision check's acquire timeout on fencelock
INSTALL_HINT = ".venv/bin/pip install -e '.[bench]' psycopg2-binary"
# distribution -> module of each peer (and driver) whose version the JSON records
PEERS = {
    "tooz": "tooz",
    "psycopg2-binary": "psycopg2",
    "PyMySQL": "pymysql",
    "tenacity": "tenacity",
    "psycopg": "psycopg",
}
# the goals
TARGET_UNCONTENDED = 1.5  # fencelock ÷ tooz, uncontended cycles/s
TARGET_HANDOFF_MS = 1.0  # fencelock handoff p50 on PostgreSQL (NOTIFY)


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class Settings(RunSettings):
    update_seconds: float
    compute: float  # seconds between an update's read and its write (0: none)
    only: tuple[str, ...]
    mysql: bool
    quick: bool

    @classmethod
    def from_args(cls, argv: Sequence[str] | None) -> Settings:
        made = parser(__doc__, "short smoke run (~45 s)")
        add_contended(made, seconds=10.0)
        made.add_argument(
            "--update-seconds", type=float, default=6.0, help="scenario 3 run length per method"
        )
        made.add_argument(
            "--compute-ms",
            type=float,
            default=0.0,
            help="scenario 3: sleep between an update's read and its write",
        )
        made.add_argument(
            "--only", default="1,2,3,4", help="scenarios to run, e.g. 1,4 (4: tooz collision)"
        )
        made.add_argument("--no-mysql", action="store_true", help="skip MariaDB rows")
        args = made.parse_args(argv)
        contended_ok(made, args)
        if args.compute_ms < 0:
            made.error("need --compute-ms >= 0")
        only = tuple(part.strip() for part in args.only.split(",") if part.strip())
        if not only or any(part not in {"1", "2", "3", "4"} for part in only):
            made.error("--only takes scenario numbers 1-4, comma-separated")
        if args.quick:
            return cls(
                2, 0.3, args.workers, 1.5, args.hold_ms / 1000, 1.0, args.compute_ms / 1000,
                only, not args.no_mysql, True,
            )  # fmt: skip
        return cls(
            3, 1.0, args.workers, args.seconds, args.hold_ms / 1000, args.update_seconds,
            args.compute_ms / 1000, only, not args.no_mysql, False,
        )  # fmt: skip


def tooz_ready(versions: dict[str, str | None], driver: str) -> bool:
    needs = {"pgsql": "psycopg2-binary", "mysql": "PyMySQL"}[driver]
    return versions.get("tooz") is not None and versions.get(needs) is not None


def fencelock_has_mysql() -> bool:
    """Whether this fencelock serves ``mysql://`` (the hook for the MariaDB rows: they run
    as soon as the scheme is registered, with no change to this script)."""
    from fencelock.backends import _FAMILIES

    return "mysql" in _FAMILIES


def advisory_url(url: str) -> str:
    return url.replace("postgresql://", "postgresql+advisory://", 1)


def tooz_coordinator(url: str) -> Any:
    """A started tooz coordinator for ``url`` (``postgresql://`` or ``mysql://``: tooz
    reads the host, port, user, password and, from the path, the database)."""
    from tooz import coordination

    with warnings.catch_warnings():  # "PostgreSQL driver is deprecated"
        warnings.simplefilter("ignore", DeprecationWarning)
        coordinator = coordination.get_coordinator(url, uuid.uuid4().hex.encode())
    coordinator.start()
    return coordinator


def tooz_pg_key(name: str) -> tuple[int, int]:
    """The key tooz's PostgreSQL driver locks for ``name``: ``pg_advisory_lock(k1, k2)``
    with the first two bytes of the name's MD5 (tooz/drivers/pgsql.py, PostgresLock)."""
    digest = hashlib.md5(name.encode(), usedforsecurity=False).digest()
    return digest[0], digest[1]


# --------------------------------------------------------------------------- 1. uncontended


def open_fencelock(url: str, name: str, renew: bool = True) -> Runner:
    client = fencelock.connect(url)
    return SyncRunner(fencelock_cycle(client.lock(name, ttl=TTL, renew=renew)), client.close)


def open_tooz(url: str, name: str) -> Runner:
    coordinator = tooz_coordinator(url)
    lock = coordinator.get_lock(name.encode())
    return SyncRunner(acquire_release(lock, blocking=True), coordinator.stop)


def open_raw_lease_statements(url: str, name: str) -> Runner:
    """fencelock's own acquire and release statements, sent straight through one
    autocommit psycopg connection: the floor of ``postgresql://``'s round trips."""
    import psycopg

    from fencelock.backends.postgresql.backend import release_mark
    from fencelock.backends.postgresql.statements import Statements
    from fencelock.engine import barging

    conn = psycopg.connect(url, autocommit=True)
    statements, owner = Statements("public"), uuid.uuid4().hex
    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    acquire = {
        "name": name,
        "owner": owner,
        "ttl": TTL,
        "bound": 0.02,
        "liveness": barging.WAITER_LIVENESS,
        "listener": int(row[0]),  # a live session, as a listener would be
    }

    def cycle() -> None:
        taken = conn.execute(statements.acquire, acquire).fetchall()
        if taken[0][0] is None:
            raise RuntimeError("raw lease statements: the lease was not granted")
        release = {"name": name, "owner": owner, "mark": release_mark()}
        conn.execute(statements.release, release).fetchall()

    return SyncRunner(cycle, conn.close)


def open_raw_pg_advisory(url: str, name: str) -> Runner:
    """``pg_advisory_lock`` + ``pg_advisory_unlock`` on one kept connection: the least a
    PostgreSQL lock can cost (no token, no lease, no queue)."""
    import psycopg

    conn = psycopg.connect(url, autocommit=True)
    key = int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big", signed=True)

    def cycle() -> None:
        conn.execute("SELECT pg_advisory_lock(%s)", (key,)).fetchall()
        conn.execute("SELECT pg_advisory_unlock(%s)", (key,)).fetchall()

    return SyncRunner(cycle, conn.close)


def mysql_connect(url: str, client_flag: int = 0) -> Any:
    """A PyMySQL autocommit connection for ``mysql://user:password@host:port/db``."""
    from urllib.parse import urlsplit

    import pymysql

    parts = urlsplit(url)
    return pymysql.connect(
        host=parts.hostname,
        port=parts.port or 3306,
        user=parts.username,
        password=parts.password or "",
        database=parts.path.strip("/"),
        autocommit=True,
        client_flag=client_flag,
    )


def open_raw_get_lock(url: str, name: str) -> Runner:
    """``GET_LOCK`` + ``RELEASE_LOCK`` on one kept connection: the floor on MariaDB."""
    conn = mysql_connect(url)
    cursor = conn.cursor()

    def cycle() -> None:
        cursor.execute("SELECT GET_LOCK(%s, 10)", (name,))
        cursor.fetchall()
        cursor.execute("SELECT RELEASE_LOCK(%s)", (name,))
        cursor.fetchall()

    return SyncRunner(cycle, conn.close)


def open_raw_mysql_lease(url: str, name: str) -> Runner:
    """fencelock's ``mysql://`` acquire (one round trip of four statements: GET_LOCK, the
    session's idle limit, the token write, its read) and release, straight through
    PyMySQL on one connection: the floor of its round trips."""
    from pymysql.constants import CLIENT

    from fencelock.backends.mysql.statements import Statements as MySQLStatements

    conn = mysql_connect(url, client_flag=CLIENT.MULTI_STATEMENTS)
    cursor = conn.cursor()
    statements = MySQLStatements(conn.db.decode() if isinstance(conn.db, bytes) else conn.db)
    params = {"lock": name, "name": name, "owner": uuid.uuid4().hex, "ttl": TTL, "idle": 30}

    def cycle() -> None:
        cursor.execute(statements.acquire, params)
        if cursor.fetchall()[0][0] != 1:
            raise RuntimeError("raw mysql lease statements: the lock was not granted")
        while cursor.nextset():
            cursor.fetchall()
        cursor.execute(statements.release, params)
        cursor.fetchall()

    return SyncRunner(cycle, conn.close)


@dataclass(frozen=True)
class UncontendedRow:
    key: str
    database: str
    label: str
    open: Callable[[str, str], Runner]
    url: str


def uncontended_rows(
    pg_url: str, mysql_url: str | None, versions: dict[str, str | None]
) -> list[UncontendedRow]:
    pg, my = "PostgreSQL", "MariaDB"
    rows = [
        UncontendedRow(
            "fencelock-pg", pg, "fencelock postgresql:// (ttl=30, renew)", open_fencelock, pg_url
        ),
        UncontendedRow(
            "fencelock-advisory", pg, "fencelock postgresql+advisory:// (ttl=30, renew)",
            open_fencelock, advisory_url(pg_url),
        ),
        UncontendedRow(
            "fencelock-advisory-norenew", pg,
            "fencelock postgresql+advisory:// (ttl=30, renew=False: a session per lease)",
            lambda url, name: open_fencelock(url, name, renew=False), advisory_url(pg_url),
        ),
    ]  # fmt: skip
    if tooz_ready(versions, "pgsql"):
        rows.append(
            UncontendedRow(
                "tooz-pg", pg, "tooz pgsql (a new connection per acquire)", open_tooz, pg_url
            )
        )
    rows += [
        UncontendedRow(
            "raw-pg-lease", pg, "raw psycopg: fencelock's acquire + release statements",
            open_raw_lease_statements, pg_url,
        ),
        UncontendedRow(
            "raw-pg-advisory", pg, "raw psycopg: pg_advisory_lock + unlock, one connection",
            open_raw_pg_advisory, pg_url,
        ),
    ]  # fmt: skip
    if mysql_url is None:
        return rows
    if fencelock_has_mysql():
        rows.append(
            UncontendedRow(
                "fencelock-mysql", my, "fencelock mysql:// (ttl=30, renew)", open_fencelock,
                mysql_url,
            )
        )  # fmt: skip
    if versions.get("PyMySQL") is not None and fencelock_has_mysql():
        rows.append(
            UncontendedRow(
                "raw-mysql-lease", my, "raw PyMySQL: fencelock's acquire + release statements",
                open_raw_mysql_lease, mysql_url,
            )
        )  # fmt: skip
    if tooz_ready(versions, "mysql"):
        rows.append(
            UncontendedRow(
                "tooz-mysql", my, "tooz mysql (a new connection per acquire)", open_tooz,
                mysql_url,
            )
        )  # fmt: skip
    if versions.get("PyMySQL") is not None:
        rows.append(
            UncontendedRow(
                "raw-mysql", my, "raw PyMySQL: GET_LOCK + RELEASE_LOCK, one connection",
                open_raw_get_lock, mysql_url,
            )
        )  # fmt: skip
    return rows


def measure_uncontended(rows: list[UncontendedRow], settings: Settings) -> list[RateResult]:
    """Interleaved rounds (each row once per round, after a warm-up); the median counts.

    A result's ``group`` is its database."""
    sides = [
        (
            RateResult(row.key, row.label, row.database),
            lambda row=row: row.open(row.url, f"{LOCK_NAME}-1-{row.key}"),
        )
        for row in rows
    ]
    return interleave(sides, settings.rounds, settings.round_seconds, warmup=0.3, batch=BATCH)


# --------------------------------------------------------------------------- 2. contended


def tooz_locker(url: str, blocking: bool | float = True) -> Locker:
    """tooz's lock as its users take it: ``acquire(blocking=True)`` (what ``with lock:``
    does). On PostgreSQL that waits in the server (``pg_advisory_lock``); on MySQL it
    polls ``GET_LOCK(name, 0)`` with tenacity's 1 s wait between tries. On MySQL,
    ``blocking=<seconds>`` waits in the server instead (``GET_LOCK(name, seconds)``)."""
    coordinator = tooz_coordinator(url)
    lock = coordinator.get_lock(LOCK_NAME.encode())
    return PeerLocker(lock, coordinator.stop, "tooz lock", blocking=blocking)


class MarkerChecked:
    """Mutual exclusion checked without clocks: each holder creates one marker file with
    ``O_EXCL`` right after acquiring and removes it just before releasing; a holder that
    finds the file already there was let in beside another, and says so in a log file
    the parent counts (the holder carries on: raising would leave the lock held)."""

    def __init__(self, inner: Locker, marker: Path, log: Path) -> None:
        self._inner, self._marker, self._log = inner, marker, log
        self._mine = False

    def acquire(self) -> int:
        token = self._inner.acquire()
        try:
            os.close(os.open(self._marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            self._mine = True
        except FileExistsError:
            with self._log.open("a") as log:
                log.write(f"{os.getpid()} {clock.now():.6f} token={token}\n")
        return token

    def release(self) -> None:
        if self._mine:
            self._mine = False
            with contextlib.suppress(FileNotFoundError):
                self._marker.unlink()
        self._inner.release()

    def close(self) -> None:
        self._inner.close()


@dataclass(frozen=True)
class Contender:
    key: str
    database: str
    label: str
    wait: str  # how a waiter learns the lock is free
    url: str
    check_dir: Path

    @property
    def fencelock(self) -> bool:
        return self.key.startswith("fencelock")

    @property
    def marker(self) -> Path:
        return self.check_dir / f"{self.key}.held"

    @property
    def overlap_log(self) -> Path:
        return self.check_dir / f"{self.key}.overlaps"

    def locker(self) -> Locker:
        inner: Locker
        if self.fencelock:
            fair = self.key.endswith("-fair")
            inner = FencelockLocker(self.url, LOCK_NAME, ttl=CONTENDED_TTL, fair=fair)
        elif self.key == "tooz-mysql-wait":
            inner = tooz_locker(self.url, blocking=ACQUIRE_TIMEOUT)
        else:
            inner = tooz_locker(self.url)
        return MarkerChecked(inner, self.marker, self.overlap_log)


def contenders(
    pg_url: str,
    mysql_url: str | None,
    versions: dict[str, str | None],
    check_dir: Path,
    quick: bool,
) -> list[Contender]:
    """The rows of scenario 2 (``quick``: without the fair=True rows and tooz mysql's
    second mode, to keep a smoke run short)."""
    pg, my = "PostgreSQL", "MariaDB"
    advisory = advisory_url(pg_url)
    found = [
        Contender("fencelock-pg", pg, "fencelock postgresql://",
                  "NOTIFY; releaser may re-take it until a waiter has waited 20 ms",
                  pg_url, check_dir),
        Contender("fencelock-pg-fair", pg, "fencelock postgresql:// fair=True",
                  "NOTIFY, FIFO", pg_url, check_dir),
        Contender("fencelock-advisory", pg, "fencelock postgresql+advisory://",
                  "NOTIFY; releaser may re-take it until a waiter has waited 20 ms",
                  advisory, check_dir),
        Contender("fencelock-advisory-fair", pg, "fencelock postgresql+advisory:// fair=True",
                  "NOTIFY, FIFO", advisory, check_dir),
    ]  # fmt: skip
    if tooz_ready(versions, "pgsql"):
        found.append(
            Contender("tooz-pg", pg, "tooz pgsql", "pg_advisory_lock: the server's lock queue",
                      pg_url, check_dir)
        )  # fmt: skip
    if quick:
        found = [c for c in found if not c.key.endswith("-fair")]
    if mysql_url is None:
        return found
    if fencelock_has_mysql():
        found.append(
            Contender("fencelock-mysql", my, "fencelock mysql://", "fencelock's wake-up",
                      mysql_url, check_dir)
        )  # fmt: skip
    if tooz_ready(versions, "mysql"):
        found.append(
            Contender("tooz-mysql", my, "tooz mysql (blocking=True)",
                      "GET_LOCK(name, 0) polled, 1 s apart", mysql_url, check_dir)
        )  # fmt: skip
        if not quick:
            found.append(
                Contender("tooz-mysql-wait", my, f"tooz mysql (blocking={ACQUIRE_TIMEOUT:g})",
                          f"GET_LOCK(name, {ACQUIRE_TIMEOUT:g}): the server's wake-up",
                          mysql_url, check_dir)
            )  # fmt: skip
    return found


class ServerWork:
    """What the server did during a contended run: transactions on PostgreSQL (each of
    fencelock's statements is one; psycopg2, tooz's driver, wraps a cycle in one),
    client statements (``Questions``) on MariaDB. Read once the workers are released
    and again once they have exited (a PostgreSQL backend flushes its counts by then)."""

    def __init__(self, database: str, url: str) -> None:
        self._database, self._url = database, url
        self.before: int | None = None

    def read(self) -> int:
        if self._database == "PostgreSQL":
            import psycopg

            with psycopg.connect(self._url, autocommit=True) as conn:
                row = conn.execute(
                    "SELECT xact_commit + xact_rollback FROM pg_stat_database "
                    "WHERE datname = current_database()"
                ).fetchone()
            return int(row[0]) if row else 0
        conn = mysql_connect(self._url)
        try:
            with conn.cursor() as cursor:
                cursor.execute("SHOW GLOBAL STATUS LIKE 'Questions'")
                found = cursor.fetchone()
            return int(found[1]) if found else 0
        finally:
            conn.close()

    def during(self, start: float, end: float) -> None:
        time.sleep(max(start - clock.now(), 0.0))
        self.before = self.read()

    def per_section(self, reports: list[WorkerReport]) -> float:
        sections = sum(len(r.sections) for r in reports)
        if self.before is None or not sections:
            return math.nan
        return (self.read() - self.before) / sections


@dataclass
class ContendedResult(Summary):
    key: str
    database: str
    label: str
    wait: str
    fifo_fraction: float  # handoffs to the longest waiter, of those with a waiter
    fifo_judged: int
    starved: int  # workers below STARVED_SHARE of the mean share
    min_share: float  # the smallest worker's count / the mean
    marker_overlaps: int
    server_work_per_section: float  # transactions (PostgreSQL) / statements (MariaDB)

    @property
    def fencelock_row(self) -> bool:
        return self.key.startswith("fencelock")


def fifo_share(reports: list[WorkerReport]) -> tuple[float, int]:
    """Of the handoffs that had someone waiting when the release began, the share that
    went to the one that had waited longest (1.0: strictly first come, first served).

    A worker waits at time t if one of its acquire calls began before t and returned
    after it; the releasing worker is not waiting then (it is releasing)."""
    sections = {r.index: r.sections for r in reports}
    called = {i: [s[0] for s in secs] for i, secs in sections.items()}
    ordered = sorted(
        ((s, r.index) for r in reports for s in r.sections), key=lambda item: item[0][1]
    )
    fifo = judged = 0
    for (prev, prev_worker), (_nxt, nxt_worker) in itertools.pairwise(ordered):
        released = prev[2]
        oldest: tuple[float, int] | None = None
        for worker, secs in sections.items():
            if worker == prev_worker:
                continue
            k = bisect.bisect_right(called[worker], released) - 1
            if k >= 0 and secs[k][1] > released and (oldest is None or secs[k][0] < oldest[0]):
                oldest = (secs[k][0], worker)
        if oldest is not None:
            judged += 1
            fifo += nxt_worker == oldest[1]
    return (fifo / judged if judged else math.nan), judged


def count_lines(path: Path) -> int:
    try:
        return len(path.read_text().splitlines())
    except FileNotFoundError:
        return 0


def analyse(
    contender: Contender, reports: list[WorkerReport], settings: Settings, work: float
) -> ContendedResult:
    summary = summarise(reports, settings.workers, settings.contended_seconds, contender.fencelock)
    mean = statistics.fmean(summary.per_worker) if summary.per_worker else 0.0
    fifo, judged = fifo_share(reports)
    return ContendedResult(
        **vars(summary),
        key=contender.key,
        database=contender.database,
        label=contender.label,
        wait=contender.wait,
        fifo_fraction=fifo,
        fifo_judged=judged,
        starved=sum(1 for n in summary.per_worker if n < STARVED_SHARE * mean)
        + (settings.workers - len(summary.per_worker)),
        min_share=min(summary.per_worker) / mean if mean else math.nan,
        marker_overlaps=count_lines(contender.overlap_log),
        server_work_per_section=work,
    )


# --------------------------------------------------------------------------- 3. row updates


def bump(compute: float) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def changes(row: dict[str, Any]) -> dict[str, Any]:
        if compute:
            time.sleep(compute)
        return {"n": row["n"] + 1}

    return changes


class UpdateWriter:
    """One writer process of scenario 3, run by the harness as a lock held 0 ms: each
    ``acquire()`` is one whole update of the counter row, and returns the retries it
    took (or ``GAVE_UP``). The harness's warm-up call only connects and reads."""

    def __init__(self, url: str, method: str, compute: float) -> None:
        import psycopg

        self._conn = psycopg.connect(url, autocommit=True)
        self._method, self._compute = method, compute
        self._warm = False

    def acquire(self) -> int:
        from fencelock.errors import ConflictError
        from fencelock.sql import for_update, optimistic_update

        key = {"id": 1}
        if not self._warm:
            self._conn.execute(f"SELECT n FROM {COUNTER_TABLE} WHERE id = 1").fetchall()  # noqa: S608 (a constant table name)
            self._warm = True
            return 0
        if self._method == "optimistic":
            try:
                return optimistic_update(
                    self._conn, COUNTER_TABLE, key, bump(self._compute)
                ).retries
            except ConflictError:
                return GAVE_UP
        with self._conn.transaction(), for_update(self._conn, COUNTER_TABLE, key) as row:
            assert row is not None
            changes = bump(self._compute)(row)
            self._conn.execute(
                f"UPDATE {COUNTER_TABLE} SET n = %s, version = version + 1 WHERE id = 1",  # noqa: S608 (a constant table name)
                (changes["n"],),
            )
        return 0

    def release(self) -> None:
        pass

    def close(self) -> None:
        self._conn.close()


@dataclass(frozen=True)
class UpdateContender:
    key: str
    label: str
    url: str
    compute: float

    def locker(self) -> Locker:
        return UpdateWriter(self.url, self.key, self.compute)


@dataclass
class UpdateResult:
    key: str
    label: str
    updates_per_second: float
    updates: int
    gave_up: int
    retries_mean: float
    retries_max: int
    retries_histogram: dict[int, int]
    latency_ms: dict[str, float | int]
    per_worker: list[int]
    jain_index: float
    counter_delta: int
    lost_updates: int  # updates that returned but are not in the counter (must be 0)
    errors: int
    first_error: str | None


def reset_counter(pg_url: str) -> int:
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {COUNTER_TABLE} "
            "(id int PRIMARY KEY, n bigint NOT NULL, version bigint NOT NULL)"
        )
        conn.execute(
            f"INSERT INTO {COUNTER_TABLE} VALUES (1, 0, 0) "  # noqa: S608 (a constant table name)
            "ON CONFLICT (id) DO UPDATE SET n = 0, version = 0"
        )
    return 0


def read_counter(pg_url: str) -> int:
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        row = conn.execute(f"SELECT n FROM {COUNTER_TABLE} WHERE id = 1").fetchone()  # noqa: S608 (a constant table name)
    return int(row[0]) if row else -1


def measure_updates(pg_url: str, settings: Settings) -> list[UpdateResult]:
    found = []
    for key, label in (
        ("optimistic", "optimistic_update (version column; 5 attempts, 10 ms base backoff)"),
        ("for_update", "for_update: SELECT ... FOR UPDATE, then UPDATE, one transaction"),
    ):
        say(f"updates: {key}, {settings.workers} writers, {settings.update_seconds:g} s ...")
        before = reset_counter(pg_url)
        contender = UpdateContender(key, label, pg_url, settings.compute)
        reports = run_contended(contender, settings.workers, 0.0, settings.update_seconds)
        summary = summarise(reports, settings.workers, settings.update_seconds, tokens=False)
        sections = [s for r in reports for s in r.sections]
        start = min((s[0] for s in sections), default=0.0)
        done = [s for s in sections if s[4] != GAVE_UP]
        retries = [s[4] for s in done]
        in_window = sum(1 for s in done if s[1] <= start + settings.update_seconds)
        per_worker = [sum(1 for s in r.sections if s[4] != GAVE_UP) for r in reports]
        delta = read_counter(pg_url) - before
        found.append(
            UpdateResult(
                key=key,
                label=label,
                updates_per_second=in_window / settings.update_seconds,
                updates=len(done),
                gave_up=len(sections) - len(done),
                retries_mean=statistics.fmean(retries) if retries else math.nan,
                retries_max=max(retries, default=0),
                retries_histogram=dict(sorted(Counter(retries).items())),
                latency_ms=summary_ms([s[1] - s[0] for s in done]),
                per_worker=per_worker,
                jain_index=jain(per_worker),
                counter_delta=delta,
                lost_updates=len(done) - delta,
                errors=summary.errors,
                first_error=summary.first_error,
            )
        )
    return found


# --------------------------------------------------------------------------- 4. tooz keys


@dataclass
class CollisionResult:
    names: tuple[str, str]
    tooz_key: tuple[int, int]
    names_tried: int
    outcomes: dict[str, str]  # lock -> what taking the second name did while the first was held
    independent: dict[str, bool]


def colliding_names() -> tuple[str, str, int]:
    """Two names tooz's PostgreSQL driver gives the same key, and how many were tried."""
    seen: dict[tuple[int, int], str] = {}
    for i in range(COLLISION_NAMES):
        name = f"orders/{i}"
        key = tooz_pg_key(name)
        if key in seen:
            return seen[key], name, i + 1
        seen[key] = name
    raise RuntimeError(f"no tooz key collision among {COLLISION_NAMES} names")


def tooz_blocks(url: str, first: str, second: str) -> tuple[bool, str]:
    """While one coordinator holds ``first``, can another take ``second`` (non-blocking)?"""
    holder, other = tooz_coordinator(url), tooz_coordinator(url)
    try:
        held = holder.get_lock(first.encode())
        held.acquire(blocking=True)
        probe = other.get_lock(second.encode())
        try:
            if probe.acquire(blocking=False):
                probe.release()
                return False, "taken at once"
            held.release()
            after = probe.acquire(blocking=False)
            if after:
                probe.release()
            return True, "refused; taken once the other name was released" if after else "refused"
        finally:
            if held.acquired:
                held.release()
    finally:
        holder.stop()
        other.stop()


def fencelock_blocks(url: str, first: str, second: str) -> tuple[bool, str]:
    with fencelock.connect(url) as holder, fencelock.connect(url) as other:
        other.lock("bench/warm-up", ttl=CONTENDED_TTL).acquire().release()  # its connections
        lease = holder.lock(first, ttl=CONTENDED_TTL).acquire(timeout=ACQUIRE_TIMEOUT)
        try:
            started = clock.now()
            other.lock(second, ttl=CONTENDED_TTL).acquire(timeout=PROBE_TIMEOUT).release()
        except fencelock.LockTimeout:
            return True, f"refused for {PROBE_TIMEOUT:g} s"
        finally:
            lease.release()
        return False, f"taken at once ({(clock.now() - started) * 1000:.1f} ms)"


def check_collision(pg_url: str, versions: dict[str, str | None]) -> CollisionResult:
    first, second, tried = colliding_names()
    outcomes: dict[str, str] = {}
    independent: dict[str, bool] = {}
    checks: list[tuple[str, Callable[[], tuple[bool, str]]]] = []
    if tooz_ready(versions, "pgsql"):
        checks.append(("tooz pgsql", lambda: tooz_blocks(pg_url, first, second)))
    checks += [
        ("fencelock postgresql://", lambda: fencelock_blocks(pg_url, first, second)),
        (
            "fencelock postgresql+advisory://",
            lambda: fencelock_blocks(advisory_url(pg_url), first, second),
        ),
    ]
    for label, check in checks:
        blocked, outcome = check()
        outcomes[label], independent[label] = outcome, not blocked
    return CollisionResult((first, second), tooz_pg_key(first), tried, outcomes, independent)


# --------------------------------------------------------------------------- targets


def targets(
    uncontended: list[RateResult],
    contended: list[ContendedResult],
    collision: CollisionResult | None,
    mysql_measured: bool,
) -> list[Target]:
    found: list[Target] = []
    rates = {r.key: r.rate for r in uncontended}
    if uncontended:
        tooz_pg = rates.get("tooz-pg")
        for key, label in (
            ("fencelock-pg", "postgresql://"),
            ("fencelock-advisory", "postgresql+advisory://"),
        ):
            found.append(
                at_least("1", f"fencelock {label} ÷ tooz pgsql",
                         ratio(rates.get(key), tooz_pg), TARGET_UNCONTENDED, "x")
            )  # fmt: skip
        if mysql_measured and "fencelock-mysql" in rates:
            found.append(
                at_least("1", "fencelock mysql:// ÷ tooz mysql",
                         ratio(rates.get("fencelock-mysql"), rates.get("tooz-mysql")),
                         TARGET_UNCONTENDED, "x")
            )  # fmt: skip
        elif mysql_measured:
            found.append(
                Target("1", "fencelock mysql:// ÷ tooz mysql", f">= {TARGET_UNCONTENDED:g}x",
                       "pending: no mysql:// in fencelock yet", None)
            )  # fmt: skip
    for c in contended:
        if not c.fencelock_row:
            continue
        if c.database == "PostgreSQL":
            found.append(
                at_most("2", f"{c.label}: handoff p50, all", float(c.handoff_ms["p50"]),
                        TARGET_HANDOFF_MS, " ms")
            )  # fmt: skip
            found.append(
                at_most("2", f"{c.label}: handoff p50, to another worker (the NOTIFY)",
                        float(c.cross_handoff_ms["p50"]), TARGET_HANDOFF_MS, " ms")
            )  # fmt: skip
        safe = c.overlaps == 0 and c.marker_overlaps == 0 and c.token_inversions == 0
        found.append(
            Target("2", f"{c.label}: starved workers; overlaps, token inversions", "0; 0",
                   f"{c.starved}; {c.overlaps + c.marker_overlaps}, {c.token_inversions}",
                   c.starved == 0 and safe)
        )  # fmt: skip
    if mysql_measured and not any(c.key == "fencelock-mysql" for c in contended) and contended:
        found.append(
            Target("2", "fencelock mysql:// contended rows", "-", "pending: no mysql:// yet", None)
        )
    if collision is not None:
        for label, free in collision.independent.items():
            found.append(
                Target("4", f"{label}: {collision.names[0]!r} and {collision.names[1]!r} "
                       "are independent locks", "yes", "yes" if free else "no", free)
            )  # fmt: skip
    return found


# --------------------------------------------------------------------------- output


def uncontended_table(results: list[RateResult], settings: Settings) -> Table:
    tooz = {r.group: r.rate for r in results if r.key.startswith("tooz")}
    floor = {r.group: r.rate for r in results if r.key in {"raw-pg-advisory", "raw-mysql"}}
    columns: list[Column] = [
        ("database", lambda r: r.group),
        ("lock", lambda r: r.label),
        ("cycles/s", lambda r: fmt_rate(r.rate)),
        ("µs/cycle", lambda r: fmt_number(r.micros, "{:,.1f}")),
        ("each round (cycles/s)", lambda r: fmt_rounds(r.rates)),
        ("÷ tooz (same database)", lambda r: fmt_ratio(ratio(r.rate, tooz.get(r.group)))),
        ("÷ raw floor", lambda r: fmt_ratio(ratio(r.rate, floor.get(r.group)))),
    ]
    title = (
        f"1. Uncontended acquire+release, one process, one name (median of {settings.rounds} "
        f"interleaved rounds x {settings.round_seconds:g} s)"
    )
    return rows_table(title, results, columns, left=2)


def handoff_table(results: list[ContendedResult], settings: Settings) -> Table:
    title = (
        f"2a. Contended: {settings.workers} processes, one name, hold "
        f"{settings.hold * 1000:g} ms, {settings.contended_seconds:g} s each; "
        "handoff = next acquire return - release call start (ms)"
    )
    rate: Column = ("CS/s", lambda c: fmt_rate(c.sections_per_second))
    fifo: Column = ("FIFO", lambda c: fmt_number(c.fifo_fraction, "{:.0%}"))
    columns = [LOCK, WAKES, rate, *HANDOFFS, fifo, HANDOFF_COUNT]
    return rows_table(title, results, columns, left=2)


def fairness_table(results: list[ContendedResult]) -> Table:
    title = (
        "2b. Contended: fairness, acquire() wait (ms), CPU, server work (transactions on "
        "PostgreSQL, statements on MariaDB) and safety checks"
    )
    columns: list[Column] = [
        LOCK,
        *FAIRNESS,
        ("min share", lambda c: fmt_number(c.min_share, "{:.0%}")),
        ("starved", lambda c: str(c.starved)),
        SELF_REACQUIRE,
        *waits("worst wait"),
        ("CPU cores", lambda c: f"{c.cpu_cores:.2f}"),
        ("server work per CS", lambda c: fmt_number(c.server_work_per_section, "{:.1f}")),
        ("overlaps (clock / file)", lambda c: f"{c.overlaps} / {c.marker_overlaps}"),
        *TOKENS_AND_ERRORS,
    ]
    return rows_table(title, results, columns, left=2)


def updates_table(results: list[UpdateResult], settings: Settings) -> Table:
    compute = f", {settings.compute * 1000:g} ms between read and write" if settings.compute else ""
    table = new_table(
        f"3. One counter row, {settings.workers} writer processes, "
        f"{settings.update_seconds:g} s each{compute}; latency = one update, retries included "
        "(ms)",
        ("method", "updates/s", "÷ FOR UPDATE", "retries mean", "max", "gave up",
         "latency p50", "p99", "max", "Jain", "lost updates", "errors"),
    )  # fmt: skip
    pessimistic = next((r for r in results if r.key == "for_update"), None)
    for r in results:
        vs = ratio(r.updates_per_second, pessimistic.updates_per_second if pessimistic else None)
        table.add_row(
            r.label, fmt_rate(r.updates_per_second), "-" if vs is None else f"{vs:.2f}x",
            fmt_number(r.retries_mean, "{:.2f}"), str(r.retries_max), str(r.gave_up),
            fmt_ms(r.latency_ms["p50"]), fmt_ms(r.latency_ms["p99"]),
            fmt_ms(r.latency_ms["max"]), fmt_number(r.jain_index, "{:.2f}"),
            str(r.lost_updates), str(r.errors),
        )  # fmt: skip
    return table


def collision_table(result: CollisionResult) -> Table:
    first, second = result.names
    table = new_table(
        f"4. Two names, one tooz key: {first!r} and {second!r} both lock "
        f"pg_advisory_lock{result.tooz_key} under tooz pgsql (md5(name)[0:2]; found among "
        f"{result.names_tried} names); the second taken while the first is held",
        ("lock", "taking the second name", "independent locks"),
    )
    for label, outcome in result.outcomes.items():
        free = result.independent[label]
        table.add_row(label, outcome, "[green]yes[/green]" if free else "[red]no[/red]")
    return table


@dataclass
class Results:
    uncontended: list[RateResult] = field(default_factory=list)
    contended: list[ContendedResult] = field(default_factory=list)
    updates: list[UpdateResult] = field(default_factory=list)
    collision: CollisionResult | None = None
    notes: list[str] = field(default_factory=list)
    load_at_start: tuple[float, float, float] = (0.0, 0.0, 0.0)
    servers: dict[str, str] = field(default_factory=dict)


def warnings_of(results: Results) -> list[str]:
    rows = [(r.label, r.rates) for r in results.uncontended]
    return noise_warnings(rows, results.load_at_start)


def tables(results: Results, settings: Settings, found: list[Target]) -> list[Table]:
    out: list[Table] = []
    if results.uncontended:
        out.append(uncontended_table(results.uncontended, settings))
    if results.contended:
        out += [handoff_table(results.contended, settings), fairness_table(results.contended)]
    if results.updates:
        out.append(updates_table(results.updates, settings))
    if results.collision is not None:
        out.append(collision_table(results.collision))
    if found:
        out.append(targets_table(found, "Targets (the issue's goals)"))
    return out


def render(results: Results, made: list[Table]) -> None:
    out = console()
    for table in made:
        out.print(table)
    failures = [(c.label, c.errors, c.first_error) for c in results.contended]
    failures += [(u.label, u.errors, u.first_error) for u in results.updates]
    print_errors(out, failures)
    for note in results.notes:
        out.print(f"[yellow]{note}[/yellow]")
    for warning in warnings_of(results):
        out.print(f"[yellow]noisy: {warning}; rerun on a quiet host for stable ratios[/yellow]")


def write_json(
    results: Results,
    settings: Settings,
    versions: dict[str, str | None],
    found: list[Target],
    made: list[Table],
    elapsed: float,
) -> Path:
    tooz = {r.group: r.rate for r in results.uncontended if r.key.startswith("tooz")}
    document = {
        "benchmark": "sql_bench",
        "seconds": elapsed,
        "settings": asdict(settings),
        "environment": environment(
            servers=results.servers,
            fencelock_mysql=fencelock_has_mysql(),
            peers=versions,
            load_average_at_start=results.load_at_start,
        ),
        "uncontended": [
            {
                "key": r.key,
                "database": r.group,
                "label": r.label,
                "cycles_per_second": r.rate,
                "micros_per_cycle": r.micros,
                "rounds_cycles_per_second": r.rates,
                "total_cycles": r.cycles,
                "tooz_ratio": ratio(r.rate, tooz.get(r.group)),
            }
            for r in results.uncontended
        ],
        "contended": [asdict(c) for c in results.contended],
        "updates": [asdict(u) for u in results.updates],
        "collision": asdict(results.collision) if results.collision else None,
        "targets": [asdict(t) for t in found],
        "notes": results.notes,
        "noise": warnings_of(results),
    }
    return write_results("sql", document, made)


# --------------------------------------------------------------------------- main


@contextlib.contextmanager
def servers(settings: Settings, results: Results) -> Iterator[tuple[str, str | None]]:
    """PostgreSQL (always) and MariaDB (for scenarios 1-2, unless --no-mysql), stopped on
    the way out, also after Ctrl-C."""
    with server_pool("fencelock-sql-bench-") as (pool, _tmp):
        pg = pool.postgresql()
        results.servers["postgresql"] = str(pg.sql("SHOW server_version")[0][0])
        mysql_url: str | None = None
        if settings.mysql and {"1", "2"} & set(settings.only):
            try:
                maria = pool.mariadb()
            except Exception as exc:  # not installed, or it did not start
                results.notes.append(f"MariaDB rows skipped: {exc}")
            else:
                results.servers["mariadb"] = str(maria.sql("SELECT VERSION()")[0][0])
                mysql_url = maria.url
                if not fencelock_has_mysql():
                    results.notes.append(
                        "MariaDB: fencelock has no mysql:// yet "
                        "(fencelock.backends._FAMILIES), so its rows are pending; "
                        "tooz's and the raw GET_LOCK loop's are measured"
                    )
        yield pg.url, mysql_url


def main(argv: Sequence[str] | None = None) -> int:
    settings = Settings.from_args(argv)
    versions = peer_versions(PEERS, INSTALL_HINT)
    results = Results(load_at_start=os.getloadavg())
    started = time.monotonic()
    with (
        servers(settings, results) as (pg_url, mysql_url),
        tempfile.TemporaryDirectory(prefix="fencelock-sql-check-") as check,
    ):
        if "1" in settings.only:
            rows = uncontended_rows(pg_url, mysql_url, versions)
            say(
                f"uncontended: {len(rows)} rows, {settings.rounds} rounds x "
                f"{settings.round_seconds:g} s ..."
            )
            results.uncontended = measure_uncontended(rows, settings)
        if "2" in settings.only:
            for contender in contenders(pg_url, mysql_url, versions, Path(check), settings.quick):
                say(
                    f"contended: {contender.label}, {settings.workers} processes, "
                    f"{settings.contended_seconds:g} s ..."
                )
                if contender.fencelock:
                    fencelock.connect(contender.url).close()  # the schema, made once
                server = pg_url if contender.database == "PostgreSQL" else mysql_url
                work = ServerWork(contender.database, server or pg_url)
                reports = run_contended(
                    contender,
                    settings.workers,
                    settings.hold,
                    settings.contended_seconds,
                    during=work.during,
                )
                per_section = work.per_section(reports)
                results.contended.append(analyse(contender, reports, settings, per_section))
        if "3" in settings.only:
            results.updates = measure_updates(pg_url, settings)
        if "4" in settings.only:
            say("tooz key collision check ...")
            results.collision = check_collision(pg_url, versions)
    found = targets(
        results.uncontended, results.contended, results.collision, mysql_url is not None
    )
    made = tables(results, settings, found)
    render(results, made)
    path = write_json(results, settings, versions, found, made, time.monotonic() - started)
    print(f"results: {path} ({time.monotonic() - started:.0f} s)")
    unsafe = any(
        c.fencelock_row and (c.errors or c.overlaps or c.marker_overlaps or c.token_inversions)
        for c in results.contended
    )
    unsafe |= any(u.errors or u.lost_updates for u in results.updates)
    return 1 if unsafe else 0


if __name__ == "__main__":
    sys.exit(main())
