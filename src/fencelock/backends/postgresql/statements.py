"""The SQL fencelock runs on PostgreSQL, in one place so a DBA can review it.

One table of leases, one row a lock name (never deleted: a free lock keeps its
last token and owner; ``expires_at`` NULL or past means free), one sequence for
the tokens, and one table of queued waiters. Every expiry is decided by the
database's own ``clock_timestamp()``, never by a client's clock.

Each statement is one autocommit transaction, and each may run twice with the same
effect: a connection that died while idle is found dead only when a statement is
sent on it, and the statement is then sent again on a new one. So an acquire by an
owner that already holds the lease returns that lease's token, and a release sent
again still says it was held (but a second, separate release of it does not).

Who may take a free lease while others wait is :mod:`fencelock.engine.barging`'s rule,
written here in SQL: anyone, unless the oldest live waiter has waited ``bound``
seconds; then only that waiter (``fair``: bound 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from fencelock.backends.statement_listing import listing

TABLE = "fencelock_leases"
SEQUENCE = "fencelock_tokens"
QUEUE = "fencelock_waiters"
# A queued waiter is alive while it keeps asking (``alive_until``) and its client's
# listening session is connected: a killed process is passed over at once, a paused
# one once its liveness deadline is past.
_ALIVE = (
    "alive_until > clock_timestamp()"
    "\nAND EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = listener)"
)


# A release's notice: the name and the waiter it wakes (the head of the line), or none.
NOTICE_SEPARATOR = "\x1f"


def parse_notice(payload: str) -> tuple[str, str | None]:
    """The name a notice is about, and the one waiter to wake (None: every waiter)."""
    name, separator, waiter = payload.partition(NOTICE_SEPARATOR)
    return name, (waiter if separator else None)


class SchemaObjects(Protocol):
    """What a backend keeps in the database: made on first use, checked for first."""

    @property
    def create(self) -> tuple[str, ...]: ...

    @property
    def present(self) -> str: ...

    @property
    def channel(self) -> str: ...

    @property
    def privileges(self) -> str:
        """The grants a user needs once an owner made the objects."""


@dataclass(frozen=True)
class Statements:
    """Every statement, for one schema; parameters are named (``%(name)s``)."""

    schema: str

    @property
    def channel(self) -> str:
        """The ``LISTEN``/``NOTIFY`` channel a release is announced on (payload: the name)."""
        return f"fencelock_{self.schema}"

    @property
    def table(self) -> str:
        return f'"{self.schema}".{TABLE}'

    @property
    def sequence(self) -> str:
        return f'"{self.schema}".{SEQUENCE}'

    @property
    def queue(self) -> str:
        return f'"{self.schema}".{QUEUE}'

    @property
    def create(self) -> tuple[str, ...]:
        """The schema objects (``fencelock init`` or the first use runs these)."""
        return (
            f"CREATE SEQUENCE IF NOT EXISTS {self.sequence}",
            f"CREATE TABLE IF NOT EXISTS {self.table} ("
            "\nname text PRIMARY KEY,"
            "\nowner text,"
            "\ntoken bigint NOT NULL,"
            "\nexpires_at timestamptz,"
            "\nsince timestamptz)",
            # An older fencelock's table lacks when its lease was taken.
            f"ALTER TABLE {self.table} ADD COLUMN IF NOT EXISTS since timestamptz",
            f"CREATE TABLE IF NOT EXISTS {self.queue} ("
            "\nname text NOT NULL,"
            "\nwaiter text NOT NULL,"
            "\nlistener integer NOT NULL,"
            "\nseq bigserial,"
            "\narrived timestamptz NOT NULL,"
            "\nalive_until timestamptz NOT NULL,"
            "\nPRIMARY KEY (name, waiter))",
        )

    @property
    def privileges(self) -> str:
        return (
            f"SELECT, INSERT, UPDATE, DELETE on {self.table} and {self.queue}, and USAGE on "
            f"{self.sequence} and {self.queue}_seq_seq"
        )

    @property
    def present(self) -> str:
        """Whether every schema object exists (then a user without ``CREATE`` on the
        schema, whose ``CREATE … IF NOT EXISTS`` PostgreSQL refuses, can go on)."""
        objects = (self.sequence, self.table, self.queue)
        since = (
            "EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema ="
            f" '{self.schema}' AND table_name = '{TABLE}' AND column_name = 'since')"
        )
        return "SELECT " + " AND ".join(
            [*(f"to_regclass('{o}') IS NOT NULL" for o in objects), since]
        )

    @property
    def acquire(self) -> str:
        """One statement: take the lease if the name is free (or its lease expired) and
        the queue lets ``owner`` have it, with a new token; otherwise queue ``owner`` (or
        refresh its place). Returns the token (NULL if busy), the holder's remaining
        seconds (NULL if none holds it).

        The token is drawn in the ``SET`` (after the row lock is ours and the lease found
        free), so tokens follow the order leases are granted in; the ``SELECT`` one is
        used only for a name never seen before. Waiters silent past their
        ``alive_until`` are dropped on the way; the head of the line is the oldest
        waiter still alive (``_ALIVE``)."""
        now = "clock_timestamp()"
        expiry = f"{now} + make_interval(secs => %(ttl)s)"
        return (
            f"WITH head AS ("
            f"\nSELECT waiter, arrived FROM {self.queue}"
            f"\nWHERE name = %(name)s AND {_ALIVE} ORDER BY seq LIMIT 1),"
            f"\ntaken AS ("
            f"\nINSERT INTO {self.table} AS l (name, owner, token, expires_at, since)"
            f"\nSELECT %(name)s, %(owner)s, nextval('{self.sequence}'), {expiry}, {now}"
            f"\nWHERE NOT EXISTS (SELECT 1 FROM head WHERE waiter <> %(owner)s"
            f"\n AND arrived <= {now} - make_interval(secs => %(bound)s))"
            f"\n OR EXISTS (SELECT 1 FROM {self.table}"
            f"\n  WHERE name = %(name)s AND owner = %(owner)s AND expires_at > {now})"
            f"\nON CONFLICT (name) DO UPDATE SET owner = excluded.owner,"
            f"\n token = CASE WHEN l.owner = excluded.owner AND l.expires_at > {now}"
            f"\n  THEN l.token ELSE nextval('{self.sequence}') END,"
            f"\n since = CASE WHEN l.owner = excluded.owner AND l.expires_at > {now}"
            f"\n  THEN l.since ELSE {now} END,"
            f"\n expires_at = {expiry}"
            f"\nWHERE l.expires_at IS NULL OR l.expires_at <= {now} OR l.owner = excluded.owner"
            f"\nRETURNING l.token),"
            f"\nqueued AS ("
            f"\nINSERT INTO {self.queue} AS q (name, waiter, listener, arrived, alive_until)"
            f"\nSELECT %(name)s, %(owner)s, %(listener)s, {now},"
            f"\n {now} + make_interval(secs => %(liveness)s)"
            f"\nWHERE NOT EXISTS (SELECT 1 FROM taken)"
            f"\nON CONFLICT (name, waiter) DO UPDATE"
            f"\nSET alive_until = excluded.alive_until, listener = excluded.listener"
            f"\nRETURNING seq),"
            f"\ndequeued AS ("
            f"\nDELETE FROM {self.queue} WHERE name = %(name)s AND ("
            f"\n (waiter = %(owner)s AND EXISTS (SELECT 1 FROM taken))"
            f"\n OR (waiter <> %(owner)s AND alive_until <= {now})))"
            f"\nSELECT (SELECT token FROM taken),"
            f"\n(SELECT extract(epoch FROM expires_at - {now}) FROM {self.table}"
            f"\n WHERE name = %(name)s AND expires_at > {now})"
        )

    def announce(self, name: str) -> str:
        """An expression that notifies the release of ``name`` (an SQL expression) to the
        head of its line alone: waking every waiter would have each ask again in vain."""
        return (
            f"pg_notify('{self.channel}', {name} || chr(31) || coalesce("
            f"\n (SELECT waiter FROM {self.queue} WHERE name = {name} AND {_ALIVE}"
            f"\n  ORDER BY seq LIMIT 1), ''))"
        )

    @property
    def leave(self) -> str:
        """Take ``owner`` out of the queue; if the lease is free, announce it, so the
        waiter it may have been kept for looks again."""
        return (
            f"WITH gone AS ("
            f"\nDELETE FROM {self.queue} WHERE name = %(name)s AND waiter = %(owner)s"
            f"\nRETURNING name)"
            f"\nSELECT {self.announce('%(name)s')} FROM gone"
            f"\nWHERE NOT EXISTS (SELECT 1 FROM {self.table} WHERE name = %(name)s"
            f"\n AND expires_at > clock_timestamp())"
        )

    @property
    def renew(self) -> str:
        return (
            f"UPDATE {self.table}"
            f"\nSET expires_at = clock_timestamp() + make_interval(secs => %(ttl)s)"
            f"\nWHERE name = %(name)s AND owner = %(owner)s AND expires_at > clock_timestamp()"
            f"\nRETURNING token"
        )

    @property
    def renew_many(self) -> str:
        """The renewer's batch, in one statement: the leases still held by their owners
        are extended, each by its TTL; returns their names and owners."""
        return (
            f"UPDATE {self.table} AS l"
            f"\nSET expires_at = clock_timestamp() + make_interval(secs => r.ttl)"
            f"\nFROM unnest(%(names)s::text[], %(owners)s::text[], %(ttls)s::float8[])"
            f"\n AS r(name, owner, ttl)"
            f"\nWHERE l.name = r.name AND l.owner = r.owner AND l.expires_at > clock_timestamp()"
            f"\nRETURNING l.name, l.owner"
        )

    @property
    def release(self) -> str:
        """Free the lease if ``owner`` still holds it, and announce it to the waiters.

        A freed lease's ``expires_at`` is the release's own mark, an instant in January
        1970 drawn at random for each release: the same release sent again (its reply
        lost) finds its mark and says it was held; another release of the same lease (a
        second ``evict``) finds another's mark and says it was not."""
        return (
            f"WITH freed AS ("
            f"\nUPDATE {self.table} SET expires_at = to_timestamp(%(mark)s)"
            f"\nWHERE name = %(name)s AND owner = %(owner)s"
            f"\n AND (expires_at > clock_timestamp() OR expires_at = to_timestamp(%(mark)s))"
            f"\nRETURNING name)"
            f"\nSELECT {self.announce('%(name)s')} FROM freed"
        )

    @property
    def inspect(self) -> str:
        return (
            f"SELECT name, CASE WHEN expires_at > clock_timestamp() THEN owner END, token,"
            f"\nCASE WHEN expires_at > clock_timestamp()"
            f"\n THEN extract(epoch FROM expires_at - clock_timestamp()) END,"
            f"\n(SELECT count(*) FROM {self.queue} q"
            f"\n WHERE q.name = l.name AND q.alive_until > clock_timestamp()),"
            f"\nextract(epoch FROM since)"
            f"\nFROM {self.table} l WHERE name = %(name)s"
        )

    @property
    def waiters(self) -> str:
        """The owners waiting for ``name``, first in line first (those ``inspect`` counts)."""
        return (
            f"SELECT waiter FROM {self.queue}"
            f"\nWHERE name = %(name)s AND alive_until > clock_timestamp() ORDER BY seq"
        )

    @property
    def list(self) -> str:
        return (
            f"SELECT name, owner, token, extract(epoch FROM expires_at - clock_timestamp()),"
            f"\n(SELECT count(*) FROM {self.queue} q"
            f"\n WHERE q.name = l.name AND q.alive_until > clock_timestamp()),"
            f"\nextract(epoch FROM since)"
            f"\nFROM {self.table} l"
            f"\nWHERE starts_with(name, %(prefix)s) AND expires_at > clock_timestamp()"
            f"\nORDER BY name"
        )


def review(schema: str = "public") -> str:
    """Every statement fencelock runs on PostgreSQL, commented, for a DBA to read
    (``fencelock init --sql --url postgresql://…`` prints it)."""
    statements = Statements(schema)
    return listing(
        [
            *(("schema objects, created on first use", sql) for sql in statements.create),
            (
                "acquire: the token (NULL if busy), the holder's remaining seconds",
                statements.acquire,
            ),
            ("a waiter that gives up leaves the line", statements.leave),
            ("renew", statements.renew),
            ("renew many leases at once (the renewer's batch)", statements.renew_many),
            ("release, announced to the head of the line", statements.release),
            ("inspect", statements.inspect),
            ("the waiters in line (lock.contenders())", statements.waiters),
            ("list", statements.list),
        ]
    )
