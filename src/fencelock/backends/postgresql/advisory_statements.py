"""The SQL of ``postgresql+advisory://``, in one place for review.

PostgreSQL's session advisory locks, keyed by a 64-bit number: the name's first 8
bytes of BLAKE2b. A table records which name holds each key and the token of its last
grant (drawn from the sequence while the lock is held), so two names that hash to
one key are told apart and reported, never silently share a lock. The waiters' line
and its handoff rule are the lease table's (:mod:`.sql`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from fencelock.backends.postgresql.statements import _ALIVE, Statements
from fencelock.backends.statement_listing import listing

ADVISORY_TABLE = "fencelock_advisory"


def advisory_key(name: str) -> int:
    """The lock name's advisory key: a signed 64-bit number."""
    digest = hashlib.blake2b(name.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


@dataclass(frozen=True)
class AdvisoryStatements:
    schema: str

    @property
    def leases(self) -> Statements:
        return Statements(self.schema)

    @property
    def table(self) -> str:
        return f'"{self.schema}".{ADVISORY_TABLE}'

    @property
    def create(self) -> tuple[str, ...]:
        return (
            *self.leases.create,
            f"CREATE TABLE IF NOT EXISTS {self.table} ("
            "\nkey bigint PRIMARY KEY,"
            "\nname text NOT NULL,"
            "\nowner text,"
            "\ntoken bigint NOT NULL,"
            "\nttl double precision NOT NULL,"
            "\nsince timestamptz)",
            f"ALTER TABLE {self.table} ADD COLUMN IF NOT EXISTS since timestamptz",
        )

    @property
    def channel(self) -> str:
        return self.leases.channel

    @property
    def privileges(self) -> str:
        return f"{self.leases.privileges}, and SELECT, INSERT, UPDATE on {self.table}"

    @property
    def present(self) -> str:
        since = (
            "EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema ="
            f" '{self.schema}' AND table_name = '{ADVISORY_TABLE}' AND column_name = 'since')"
        )
        return f"{self.leases.present} AND to_regclass('{self.table}') IS NOT NULL AND {since}"

    @property
    def acquire(self) -> str:
        """On the session's connection: take the key's lock if the line lets ``owner``
        (and this session does not hold it already: PostgreSQL would stack it), record
        the name and draw the token while it is held; else queue ``owner``. Returns
        whether the lock was taken, the token (NULL if the key is another name's) and
        the name recorded for the key."""
        leases, now = self.leases, "clock_timestamp()"
        return (
            f"WITH head AS ("
            f"\nSELECT waiter, arrived FROM {leases.queue}"
            f"\nWHERE name = %(name)s AND {_ALIVE} ORDER BY seq LIMIT 1),"
            f"\ngot AS ("
            f"\nSELECT CASE WHEN %(mine)s OR EXISTS (SELECT 1 FROM head"
            f"\n  WHERE waiter <> %(owner)s"
            f"\n  AND arrived <= {now} - make_interval(secs => %(bound)s))"
            f"\n  OR EXISTS ({self._kept})"
            f"\n THEN false ELSE pg_try_advisory_lock(%(key)s::bigint) END AS ok),"
            f"\ntaken AS ("
            f"\nINSERT INTO {self.table} AS a (key, name, owner, token, ttl, since)"
            f"\nSELECT %(key)s, %(name)s, %(owner)s, nextval('{leases.sequence}'), %(ttl)s, {now}"
            f"\nFROM got WHERE ok"
            f"\nON CONFLICT (key) DO UPDATE SET owner = excluded.owner, since = excluded.since,"
            f"\n token = nextval('{leases.sequence}'), ttl = excluded.ttl"
            f"\nWHERE a.name = excluded.name"
            f"\nRETURNING a.token),"
            f"\nqueued AS ("
            f"\nINSERT INTO {leases.queue} (name, waiter, listener, arrived, alive_until)"
            f"\nSELECT %(name)s, %(owner)s, %(listener)s, {now},"
            f"\n {now} + make_interval(secs => %(liveness)s)"
            f"\nFROM got WHERE NOT ok"
            f"\nON CONFLICT (name, waiter) DO UPDATE"
            f"\nSET alive_until = excluded.alive_until, listener = excluded.listener),"
            f"\ndequeued AS ("
            f"\nDELETE FROM {leases.queue} WHERE name = %(name)s AND ("
            f"\n (waiter = %(owner)s AND (SELECT ok FROM got))"
            f"\n OR (waiter <> %(owner)s AND alive_until <= {now})))"
            f"\nSELECT (SELECT ok FROM got), (SELECT token FROM taken),"
            f"\n(SELECT name FROM {self.table} WHERE key = %(key)s),"
            f"\n(SELECT extract(epoch FROM expires_at - {now}) FROM ({self._kept}) k)"
        )

    @property
    def _kept(self) -> str:
        """The name's row in the lease table while it is live: a name kept after its
        advisory lock (``keep``), or a ``postgresql://`` lease of the same name."""
        return (
            f"SELECT expires_at FROM {self.leases.table}"
            "\n  WHERE name = %(name)s AND expires_at > clock_timestamp()"
        )

    @property
    def keep(self) -> str:
        """On the session's connection, before :attr:`unlock`: keep the name taken
        ``seconds`` more by the server's clock, as a row of the lease table that every
        acquire of the name respects (run-once's ``at_least``). Only while this session
        holds the key for ``owner``; returns the name if kept."""
        leases = self.leases
        return (
            f"INSERT INTO {leases.table} AS k (name, owner, token, since, expires_at)"
            f"\nSELECT a.name, a.owner, a.token, a.since,"
            f"\n clock_timestamp() + make_interval(secs => %(seconds)s)"
            f"\nFROM {self.table} a WHERE a.key = %(key)s AND a.name = %(name)s"
            f"\n AND a.owner = %(owner)s"
            f"\n AND EXISTS ({self._held('a.key')} AND l.pid = pg_backend_pid())"
            f"\nON CONFLICT (name) DO UPDATE SET owner = excluded.owner,"
            f"\n token = excluded.token, since = excluded.since, expires_at = excluded.expires_at"
            f"\nRETURNING k.name"
        )

    @property
    def unlock(self) -> str:
        """On the session's connection: let the key go, and announce the name."""
        return f"SELECT pg_advisory_unlock(%(key)s::bigint), {self.leases.announce('%(name)s')}"

    @property
    def give_back(self) -> str:
        """On the session's connection: :attr:`unlock`, if the session holds the key (an
        acquire statement cancelled in flight may or may not have taken it)."""
        return (
            f"SELECT pg_advisory_unlock(%(key)s::bigint), {self.leases.announce('%(name)s')}"
            f"\nWHERE EXISTS ({self._held('%(key)s::bigint')} AND l.pid = pg_backend_pid())"
        )

    @property
    def holds(self) -> str:
        """On the session's connection: whether it still holds the key for ``owner``;
        the session's idle timeout (how long the server keeps it through silence) set
        to ``timeout`` seconds, and recorded for ``inspect``."""
        return (
            f"WITH h AS (SELECT EXISTS ({self._held('%(key)s::bigint')}"
            f" AND l.pid = pg_backend_pid()) AS held,"
            f"\n set_config('idle_session_timeout', %(timeout_ms)s, false)),"
            f"\nu AS (UPDATE {self.table} SET ttl = %(timeout)s"
            f"\n WHERE key = %(key)s AND owner = %(owner)s AND (SELECT held FROM h))"
            f"\nSELECT held FROM h"
        )

    @property
    def evict(self) -> str:
        """From any connection: end the session that holds the key for ``owner`` (the
        server lets its locks go; waits up to 5 s for it to be gone), and announce it."""
        return (
            f"SELECT pg_terminate_backend(l.pid, 5000), {self.leases.announce('a.name')}"
            f"\nFROM {self.table} a JOIN pg_locks l ON {_granted('l', 'a.key')}"
            f"\nWHERE a.key = %(key)s AND a.owner = %(owner)s"
        )

    @property
    def inspect(self) -> str:
        return (
            f"SELECT a.name, CASE WHEN h.held THEN a.owner END, a.token, {self._remaining},"
            f"\n (SELECT count(*) FROM {self.leases.queue} q"
            f"\n  WHERE q.name = a.name AND q.alive_until > clock_timestamp()),"
            f"\n extract(epoch FROM a.since)"
            f"\nFROM {self.table} a,"
            f"\n LATERAL (SELECT EXISTS ({self._held('a.key')}) AS held) h"
            f"\nWHERE a.key = %(key)s AND a.name = %(name)s"
        )

    @property
    def list(self) -> str:
        return (
            f"SELECT a.name, a.owner, a.token, {self._remaining},"
            f"\n (SELECT count(*) FROM {self.leases.queue} q"
            f"\n  WHERE q.name = a.name AND q.alive_until > clock_timestamp()),"
            f"\n extract(epoch FROM a.since)"
            f"\nFROM {self.table} a"
            f"\nWHERE starts_with(a.name, %(prefix)s) AND EXISTS ({self._held('a.key')})"
            f"\nORDER BY a.name"
        )

    @property
    def _remaining(self) -> str:
        """The holder's TTL less how long its session has been idle (when this user may
        see the holder's activity; else the whole TTL)."""
        return (
            "greatest(a.ttl - coalesce("
            "(SELECT extract(epoch FROM clock_timestamp() - s.state_change)"
            f"\n  FROM pg_stat_activity s JOIN pg_locks l ON l.pid = s.pid"
            f"\n  WHERE s.state = 'idle' AND {_granted('l', 'a.key')} LIMIT 1), 0), 0)"
        )

    @staticmethod
    def _held(key: str) -> str:
        return f"SELECT 1 FROM pg_locks l WHERE {_granted('l', key)}"


def _granted(lock: str, key: str) -> str:
    """Row ``lock`` of pg_locks is a granted advisory lock on ``key``: pg_locks shows a
    bigint key as two 32-bit halves (``classid``, ``objid``) with ``objsubid`` 1."""
    return (
        f"{lock}.locktype = 'advisory' AND {lock}.granted AND {lock}.objsubid = 1"
        f" AND {lock}.classid = (({key} >> 32) & 4294967295)::bigint::oid"
        f" AND {lock}.objid = ({key} & 4294967295)::bigint::oid"
    )


def review(schema: str = "public") -> str:
    """Every statement ``postgresql+advisory://`` runs, commented, for a DBA to read
    (``fencelock init --sql --url postgresql+advisory://…`` prints it)."""
    statements = AdvisoryStatements(schema)
    return listing(
        [
            *(("schema objects, created on first use", sql) for sql in statements.create),
            (
                "acquire, on the session: taken?, the token, the key's name, how long the "
                "name is still kept",
                statements.acquire,
            ),
            ("a waiter that gives up leaves the line", statements.leases.leave),
            ("renew, on the session's connection", statements.holds),
            ("release, on the session's connection", statements.unlock),
            (
                "an acquire cancelled in flight: what it may have taken, let go",
                statements.give_back,
            ),
            ("keep the name after the release (run-once's at_least), before it", statements.keep),
            ("a kept name, seen or ended early", statements.leases.inspect),
            ("kept names listed", statements.leases.list),
            ("a kept name's keep ended (a forced release)", statements.leases.release),
            ("release of another client's lease: its session ends", statements.evict),
            ("inspect", statements.inspect),
            ("the waiters in line (lock.contenders())", statements.leases.waiters),
            ("list", statements.list),
        ]
    )
