"""The SQL ``mysql://`` runs, in one place for review, and how lock names become
``GET_LOCK`` names.

``GET_LOCK`` names are server-wide, at most 64 characters, and case-insensitive on
MySQL (case-sensitive on MariaDB). A name made only of ``a-z 0-9 / . _ : -`` that fits
is used as it is after the prefix; any other becomes ``prefix#`` and 32 hex digits of
its BLAKE2b hash. One row a name, keyed by that lock name, records the full name (so a
hash collision is reported, never shared), the owner, the TTL, and the token counter,
raised only while the lock is held. A second table keeps a name taken after its lock is
let go (run-once's ``at_least``), until a time of the server's clock.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from fencelock.backends.statement_listing import listing

MAX_LOCK_NAME = 64
_PLAIN = re.compile(r"[a-z0-9/._:-]+")
TABLE = "fencelock_locks"
KEEPS = "fencelock_keeps"
OWNER_WIDTH = 400  # 40 hex, a dot, and the holder in base32 (fencelock.holder)
_OWNER = f"VARCHAR({OWNER_WIDTH}) CHARACTER SET ascii"


def lock_name(prefix: str, name: str) -> str:
    """The ``GET_LOCK`` name for lock ``name``."""
    if _PLAIN.fullmatch(name) and len(prefix) + len(name) <= MAX_LOCK_NAME:
        return prefix + name
    return f"{prefix}#{hashlib.blake2b(name.encode(), digest_size=16).hexdigest()}"


@dataclass(frozen=True)
class Statements:
    database: str

    @property
    def table(self) -> str:
        return f"`{self.database.replace('`', '``')}`.{TABLE}"

    @property
    def keeps(self) -> str:
        return f"`{self.database.replace('`', '``')}`.{KEEPS}"

    @property
    def create(self) -> str:
        return (
            f"CREATE TABLE IF NOT EXISTS {self.table} ("
            "\n lock_name VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin PRIMARY KEY,"
            "\n name VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,"
            f"\n owner {_OWNER},"
            "\n token BIGINT NOT NULL,"
            "\n ttl DOUBLE NOT NULL,"
            "\n since DOUBLE"
            "\n) ENGINE = InnoDB;"
            f"\nCREATE TABLE IF NOT EXISTS {self.keeps} ("
            "\n lock_name VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin PRIMARY KEY,"
            "\n name VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,"
            f"\n owner {_OWNER} NOT NULL,"
            "\n token BIGINT NOT NULL,"
            "\n until DATETIME(6) NOT NULL"
            "\n) ENGINE = InnoDB;"
            # An older fencelock's tables kept a bare 40-hex owner, without its holder.
            f"\nALTER TABLE {self.table} MODIFY owner {_OWNER};"
            f"\nALTER TABLE {self.keeps} MODIFY owner {_OWNER} NOT NULL;"
            # ... nor when its lease was taken (MySQL has no ADD COLUMN IF NOT EXISTS).
            "\nSET @fencelock_since = IF(EXISTS (SELECT 1 FROM information_schema.COLUMNS"
            f"\n WHERE TABLE_SCHEMA = {self._database_literal} AND TABLE_NAME = '{TABLE}'"
            "\n AND COLUMN_NAME = 'since'), 'DO 0',"
            f"\n 'ALTER TABLE {self.table} ADD COLUMN since DOUBLE');"
            "\nPREPARE fencelock_since FROM @fencelock_since;"
            "\nEXECUTE fencelock_since;"
            "\nDEALLOCATE PREPARE fencelock_since"
        )

    @property
    def _database_literal(self) -> str:
        return "'" + self.database.replace("\\", "\\\\").replace("'", "''") + "'"

    @property
    def present(self) -> str:
        """How many of the columns made since the first tables exist: the two tables'
        owner wide enough for a holder's description and the lease's ``since`` (all
        three: nothing to create or change)."""
        return (
            "SELECT COUNT(*) FROM information_schema.COLUMNS"
            " WHERE TABLE_SCHEMA = %(database)s AND ("
            f"TABLE_NAME IN ('{TABLE}', '{KEEPS}') AND COLUMN_NAME = 'owner'"
            f" AND CHARACTER_MAXIMUM_LENGTH >= {OWNER_WIDTH}"
            f" OR TABLE_NAME = '{TABLE}' AND COLUMN_NAME = 'since')"
        )

    @property
    def take(self) -> str:
        """Take the lock without waiting unless this connection has it already (a
        ``GET_LOCK`` it holds would be counted twice on MariaDB); 1 if it is ours."""
        return "SELECT IF(IS_USED_LOCK(%(lock)s) = CONNECTION_ID(), 1, GET_LOCK(%(lock)s, 0))"

    @property
    def grant(self) -> str:
        """While the lock is held by this connection: the next token for the name (a
        row of another name, on a hash collision, is left alone)."""
        return (
            f"INSERT INTO {self.table} (lock_name, name, owner, token, ttl, since)"
            "\nSELECT %(lock)s, %(name)s, %(owner)s, 1, %(ttl)s, UNIX_TIMESTAMP(NOW(6)) FROM DUAL"
            "\nWHERE IS_USED_LOCK(%(lock)s) = CONNECTION_ID()"
            "\nON DUPLICATE KEY UPDATE"
            "\n token = IF(name = VALUES(name), token + 1, token),"
            "\n owner = IF(name = VALUES(name), VALUES(owner), owner),"
            "\n since = IF(name = VALUES(name), VALUES(since), since),"
            "\n ttl = IF(name = VALUES(name), VALUES(ttl), ttl)"
        )

    @property
    def granted(self) -> str:
        return f"SELECT name, owner, token FROM {self.table} WHERE lock_name = %(lock)s"

    @property
    def acquire(self) -> str:
        """One round trip: take (never stacking), and while held set the session's idle
        limit to the TTL and draw the token; the last result is the name's row."""
        return self._granting(self.take)

    @property
    def wait(self) -> str:
        """As :attr:`acquire`, but waiting up to ``seconds`` inside ``GET_LOCK`` (the
        server wakes us at the release): a woken waiter is granted in the same trip."""
        return self._granting("SELECT GET_LOCK(%(lock)s, %(seconds)s)")

    def _granting(self, take: str) -> str:
        """The result sets: taken?, the keep (a row if the name is kept: the lock taken
        is let go again), the idle limit, the grant, the name's row."""
        steps = (take, self.kept, "SET SESSION wait_timeout = %(idle)s", self.grant, self.granted)
        return ";\n".join(steps)

    @property
    def kept(self) -> str:
        """If the name is kept (run-once's ``at_least``): the microseconds left, and the
        lock this connection just took let go again, so no token is drawn."""
        return (
            "SELECT TIMESTAMPDIFF(MICROSECOND, NOW(6), until),"
            "\n IF(IS_USED_LOCK(%(lock)s) = CONNECTION_ID(), RELEASE_LOCK(%(lock)s), NULL)"
            f"\nFROM {self.keeps} WHERE lock_name = %(lock)s AND until > NOW(6)"
        )

    @property
    def keep_after(self) -> str:
        """On the lease's connection, while it holds the lock: keep the name taken
        ``micros`` more by the server's clock, then let the lock go (in that order, so
        no acquire finds the name free between); the last result is RELEASE_LOCK's."""
        return (
            f"INSERT INTO {self.keeps} (lock_name, name, owner, token, until)"
            "\nSELECT lock_name, name, owner, token, NOW(6) + INTERVAL %(micros)s MICROSECOND"
            f"\nFROM {self.table}"
            "\nWHERE lock_name = %(lock)s AND owner = %(owner)s"
            "\nAND IS_USED_LOCK(%(lock)s) = CONNECTION_ID()"
            "\nON DUPLICATE KEY UPDATE name = VALUES(name), owner = VALUES(owner),"
            "\n token = VALUES(token), until = VALUES(until);"
            "\nSELECT RELEASE_LOCK(%(lock)s)"
        )

    @property
    def unkeep(self) -> str:
        """A kept name's keep ended early (a forced release)."""
        return (
            f"DELETE FROM {self.keeps}"
            "\nWHERE lock_name = %(lock)s AND owner = %(owner)s AND until > NOW(6)"
        )

    @property
    def inspect_kept(self) -> str:
        return (
            "SELECT name, owner, token, TIMESTAMPDIFF(MICROSECOND, NOW(6), until) / 1e6, 0, NULL"
            f"\nFROM {self.keeps} WHERE lock_name = %(lock)s AND until > NOW(6)"
        )

    @property
    def list_kept(self) -> str:
        return (
            "SELECT name, owner, token, TIMESTAMPDIFF(MICROSECOND, NOW(6), until) / 1e6, 0, NULL"
            f"\nFROM {self.keeps}"
            "\nWHERE LEFT(name, CHAR_LENGTH(%(prefix)s)) = %(prefix)s AND until > NOW(6)"
            "\nORDER BY name"
        )

    @property
    def keep(self) -> str:
        """Renew: still ours? The session's idle limit (the TTL the server enforces)
        is set by a statement before it."""
        return (
            f"UPDATE {self.table} SET ttl = %(ttl)s"
            "\nWHERE lock_name = %(lock)s AND owner = %(owner)s"
            "\nAND IS_USED_LOCK(%(lock)s) = CONNECTION_ID()"
        )

    @property
    def renew(self) -> str:
        """The idle limit set anew (an extend may change the TTL), then :attr:`keep`."""
        return f"SET SESSION wait_timeout = %(idle)s;\n{self.keep}"

    @property
    def release(self) -> str:
        return "SELECT RELEASE_LOCK(%(lock)s)"

    @property
    def used_by(self) -> str:
        """The connection holding ``lock`` now, or NULL."""
        return "SELECT IS_USED_LOCK(%(lock)s)"

    @property
    def holder(self) -> str:
        """The connection holding ``lock`` for ``owner`` (to end it: a forced release)."""
        return (
            f"SELECT IS_USED_LOCK(lock_name) FROM {self.table}"
            "\nWHERE lock_name = %(lock)s AND owner = %(owner)s"
        )

    @property
    def inspect(self) -> str:
        return (
            f"SELECT name, IF(IS_USED_LOCK(lock_name) IS NULL, NULL, owner), token,"
            f"\n {self._remaining}, {self._waiters}, since"
            f"\nFROM {self.table} WHERE lock_name = %(lock)s"
        )

    @property
    def list(self) -> str:
        return (
            f"SELECT name, owner, token, {self._remaining}, {self._waiters}, since"
            f"\nFROM {self.table}"
            "\nWHERE LEFT(name, CHAR_LENGTH(%(prefix)s)) = %(prefix)s"
            "\nAND IS_USED_LOCK(lock_name) IS NOT NULL ORDER BY name"
        )

    @property
    def _remaining(self) -> str:
        """The TTL less how long the holder's connection has sat idle (whole seconds,
        where this user may see it)."""
        return (
            "IF(IS_USED_LOCK(lock_name) IS NULL, NULL, GREATEST(ttl - COALESCE("
            "\n (SELECT p.TIME FROM information_schema.PROCESSLIST p"
            "\n  WHERE p.ID = IS_USED_LOCK(lock_name) AND p.COMMAND = 'Sleep'), 0), 0))"
        )

    @property
    def _waiters(self) -> str:
        return (
            "(SELECT COUNT(*) FROM information_schema.PROCESSLIST w"
            "\n WHERE w.STATE = 'User lock'"
            "\n AND LOCATE(CONCAT(CHAR(39), lock_name, CHAR(39)), w.INFO) > 0)"
        )


def review(database: str) -> str:
    """Every statement ``mysql://`` runs, commented, for a DBA to read
    (``fencelock init --sql --url mysql://…`` prints it)."""
    statements = Statements(database)
    return listing(
        [
            ("the tables, created on first use", statements.create),
            ("acquire: one round trip on the lease's own connection", statements.acquire),
            ("a waiter waits inside GET_LOCK, granted in the same trip", statements.wait),
            ("renew, on the lease's connection", statements.renew),
            ("release, on the lease's connection", statements.release),
            ("release of another client's lease: its connection is ended", statements.holder),
            ("keep the name after the release (run-once's at_least)", statements.keep_after),
            ("a kept name's keep ended early (a forced release)", statements.unkeep),
            ("a kept name, seen", statements.inspect_kept),
            ("kept names, listed", statements.list_kept),
            ("inspect", statements.inspect),
            ("list", statements.list),
        ]
    )
