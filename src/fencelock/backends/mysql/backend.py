"""``mysql://``: MySQL/MariaDB named locks (``GET_LOCK``), a connection per held lease.

A lease is a named lock held by a connection of its own, never one of the
application's pool: the lock ends with the connection, so the connection's idle limit
(``wait_timeout``, the TTL in whole seconds, rounded up) is the lease's TTL on the
server, and each renewal is a statement on it. Taking the lock, setting that limit
and drawing the token from the name's counter row (only while the lock is held) is one
round trip. A waiter waits inside ``GET_LOCK`` on its connection, woken by the server
the moment the lock is released; never by polling. A lost connection is a lost lease:
the next renewal says so.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import math
import random
from typing import Any

import aiomysql

from fencelock import blocking_call, forking
from fencelock.backends import base
from fencelock.backends.mysql.connections import Connections, discard, lost
from fencelock.backends.mysql.options import mysql_options
from fencelock.backends.mysql.statements import lock_name
from fencelock.backends.mysql.watch import WatchedConnection
from fencelock.engine.backoff import Backoff
from fencelock.engine.urls import ParsedURL
from fencelock.errors import BackendUnavailable, ConfigError

# Between looks at a killed connection's lock: it is let go within milliseconds.
_KILL_POLL = Backoff(0.001, 0.05, spread=0.5)

# A wait inside GET_LOCK is answered this long after its timeout at the latest.
WAIT_SLACK = 5.0


def idle_limit(ttl: float) -> int:
    """The server's idle limit for a lease of ``ttl``: never shorter than the TTL."""
    return max(1, math.ceil(ttl))


class AsyncMySQLBackend(base.RenewsEach, base.EndsWithItsSession):
    """The asyncio MySQL backend; the sync one runs it on a shared loop."""

    capabilities = base.Capabilities(
        fair=False,  # GET_LOCK's waiters are woken in the server's order
        renews_in_batches=True,  # each on its own connection, all in one loop trip
        keeps=True,  # a name kept after its lock: a row of the keeps table
        steps=True,  # the blocking client steps it: a reply is read on the caller's thread
    )

    def __init__(self, parsed: ParsedURL) -> None:
        self.options = mysql_options(parsed)
        self.url = parsed.redacted
        self.request_bound = parsed.request_bound
        self.connections = Connections(self.options, self.url)
        self.statements = self.connections.statements
        self._held: dict[str, tuple[WatchedConnection, str]] = {}  # owner -> conn, lock
        forking.register(self)

    def _reset_after_fork(self) -> None:
        forking.abandon([held.conn for held, _ in self._held.values()])
        self._held = {}
        self.connections.forget()

    def lock_name(self, name: str) -> str:
        return lock_name(self.options.prefix, name)

    async def open(self) -> None:
        await self.connections.ensure_table()

    def attempt(
        self, name: str, owner: str, ttl: float, fair: bool = False, renewed: bool = True
    ) -> MySQLAttempt:
        if fair:
            raise ConfigError(
                f"{self.url}: fair=True is not offered on mysql:// (GET_LOCK wakes its "
                "waiters in the server's order, which fencelock cannot make FIFO)"
            )
        return MySQLAttempt(self, name, owner, ttl)

    def hold(self, owner: str, conn: aiomysql.Connection, lock: str) -> WatchedConnection:
        held = self._held[owner] = (WatchedConnection(conn, self.url), lock)
        return held[0]

    async def release(self, name: str, owner: str) -> bool:
        held = self._held.pop(owner, None)
        if held is None:
            return await self._evict(name, owner)
        watched, lock = held
        return await self._let_go(watched, self.statements.release, {"lock": lock})

    async def keep(self, name: str, owner: str, seconds: float) -> bool:
        """Keep ``name`` taken ``seconds`` more by the server's clock, then let the lock
        go, in one round trip on the lease's connection."""
        held = self._held.pop(owner, None)
        if held is None:
            return False
        watched, lock = held
        params = {"lock": lock, "owner": owner, "micros": max(1, round(seconds * 1e6))}
        return await self._let_go(watched, self.statements.keep_after, params)

    async def _let_go(self, watched: WatchedConnection, query: str, params: dict[str, Any]) -> bool:
        """Run ``query``, whose last result is ``RELEASE_LOCK``'s, on the lease's
        connection: whether it let the lock go. The connection goes back to the pool if
        it did, and is ended if it did not."""
        watched.done()
        conn = watched.conn
        try:
            sets = await self.connections.run(conn, query, params, self.options.timeout)
        except Exception as exc:
            if lost(exc):
                return False  # the connection, and the lock with it, were gone already
            raise
        released = bool(sets[-1] and sets[-1][0][0] == 1)
        if released:
            await self.connections.checkin(conn, conn.fencelock_idle_limit)
        else:
            await discard(conn)
        return released

    async def _evict(self, name: str, owner: str) -> bool:
        """Another client's lease: end the connection that holds it (MySQL lets a named
        lock go no other way), or the name's keep."""
        lock = self.lock_name(name)
        rows = await self.connections.fetch(self.statements.holder, {"lock": lock, "owner": owner})
        if rows and rows[0][0] is not None:
            holder = int(rows[0][0])
            await self.connections.fetch(f"KILL CONNECTION {holder}", {})
            await self._await_let_go(lock, holder)
            return True
        conn = await self.connections.checkout()
        params = {"lock": lock, "owner": owner}
        await self.connections.run(conn, self.statements.unkeep, params, self.options.timeout)
        ended = bool(conn.affected_rows())
        await self.connections.checkin(conn)
        return ended

    async def _await_let_go(self, lock: str, holder: int) -> None:
        """Return once connection ``holder`` no longer holds ``lock``. ``KILL`` only
        marks a connection: its thread lets its named locks go as it ends, a moment
        later (the killed client may hear its socket close first)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.options.timeout
        for wait in _KILL_POLL.waits(random.random):
            rows = await self.connections.fetch(self.statements.used_by, {"lock": lock})
            if not rows or rows[0][0] is None or int(rows[0][0]) != holder:
                return
            if loop.time() + wait > deadline:
                raise BackendUnavailable(
                    f"MySQL killed connection {holder}, but it still held {lock!r} "
                    f"{self.options.timeout:g} s later"
                )
            await asyncio.sleep(wait)

    async def renew(self, name: str, owner: str, ttl: float) -> bool:
        held = self._held.get(owner)
        if held is None:
            return False
        watched, lock = held
        conn = watched.conn
        params = {"idle": idle_limit(ttl), "ttl": ttl, "lock": lock, "owner": owner}
        try:
            await self.connections.run(conn, self.statements.renew, params, self.options.timeout)
        except Exception as exc:
            if lost(exc):
                self._held.pop(owner, None)
                watched.done()
                return False
            raise
        conn.fencelock_idle_limit = params["idle"]
        return bool(conn.affected_rows())

    async def inspect(self, name: str) -> base.LockInfo | None:
        lock = {"lock": self.lock_name(name)}
        rows = await self.connections.fetch(self.statements.inspect, lock)
        info = _info(rows[0]) if rows else None
        if info is not None and info.held:
            return info
        kept = await self.connections.fetch(self.statements.inspect_kept, lock)
        return _info(kept[0]) if kept else info

    async def list(self, prefix: str) -> list[base.LockInfo]:
        rows = await self.connections.fetch(self.statements.list, {"prefix": prefix})
        held = {info.name: info for info in map(_info, rows)}
        kept = await self.connections.fetch(self.statements.list_kept, {"prefix": prefix})
        for info in map(_info, kept):  # names kept after their lock (and not held again)
            held.setdefault(info.name, info)
        return [held[name] for name in sorted(held)]

    async def waiters(self, name: str) -> builtins.list[str] | None:
        """None: GET_LOCK's waiters are in no line fencelock could read (and it keeps none)."""
        return None

    async def close(self) -> None:
        held, self._held = self._held, {}
        for watched, _ in held.values():
            watched.done()
            await discard(watched.conn)  # the server lets go of its lock
        await self.connections.close()


def _kept_for(sets: list[list[tuple[Any, ...]]]) -> float | None:
    """Seconds the name is still kept, from an acquire's result sets; None if it is not."""
    kept = sets[1]
    return max(0.0, int(kept[0][0]) / 1e6) if kept else None


def _info(row: tuple[Any, ...]) -> base.LockInfo:
    name, owner, token, remaining, waiters, since = row
    left = None if owner is None or remaining is None else float(remaining)
    taken = None if left is None or since is None else float(since)
    return base.LockInfo(name, owner, int(token), left, int(waiters), taken)


class MySQLAttempt:
    """One contender and its connection: it waits inside ``GET_LOCK`` on it, and holds
    the lock on it once granted."""

    def __init__(self, backend: AsyncMySQLBackend, name: str, owner: str, ttl: float) -> None:
        self._backend, self._name, self._owner, self._ttl = backend, name, owner, ttl
        self._lock = backend.lock_name(name)
        self._conn: aiomysql.Connection | None = None
        self._sending: asyncio.Future[list[list[tuple[Any, ...]]]] | None = None
        self._woken: list[list[tuple[Any, ...]]] | None = None  # a wait's grant
        self._granted = False

    async def _connection(self) -> aiomysql.Connection:
        if self._conn is None or self._conn.closed:
            self._conn = await self._backend.connections.checkout()
        return self._conn

    def _params(self, **more: float) -> dict[str, Any]:
        return {
            "lock": self._lock,
            "name": self._name,
            "owner": self._owner,
            "ttl": self._ttl,
            "idle": idle_limit(self._ttl),
            **more,
        }

    async def try_acquire(self) -> base.AttemptResult:
        woken, self._woken = self._woken, None
        sets = woken if woken is not None else await self._ask()
        return await self._outcome(sets)

    async def _ask(self) -> list[list[tuple[Any, ...]]]:
        backend = self._backend
        conn = await self._connection()
        params = self._params()
        # Shielded: cancelled mid-statement, the grant may have landed on the server;
        # close() then waits for the answer and gives back a lock nobody will hold.
        # Stepped (the blocking client), it is read right here; a Ctrl-C waits for it.
        asking = backend.connections.run(
            conn, backend.statements.acquire, params, backend.options.timeout
        )
        try:
            if blocking_call.active():
                sets = await asking
            else:
                self._sending = asyncio.ensure_future(asking)
                sets = await asyncio.shield(self._sending)
        finally:
            if conn.closed:
                self._conn = None
        self._sending = None
        conn.fencelock_idle_limit = params["idle"]
        return sets

    async def _outcome(self, sets: list[list[tuple[Any, ...]]]) -> base.AttemptResult:
        backend, conn = self._backend, self._conn
        assert conn is not None
        kept = _kept_for(sets)
        if kept is not None:  # the lock was let go again: the name is kept a while
            return base.Busy(retry_after=kept)
        taken = sets[0][0][0] == 1
        if not taken:
            return base.Busy(notified=True)
        name, owner, token = sets[-1][0]
        if name != self._name:
            await backend.connections.run(
                conn, backend.statements.release, {"lock": self._lock}, backend.options.timeout
            )
            raise ConfigError(
                f"lock names {self._name!r} and {name!r} share the MySQL lock name "
                f"{self._lock!r} in {backend.url}: rename one of them (names are recorded "
                f"in {backend.statements.table}, so this is never silent)"
            )
        assert owner == self._owner, "the token row changed while our lock was held"
        self._granted = True
        watched = backend.hold(self._owner, conn, self._lock)
        return base.Acquired(int(token), session=watched.news)

    async def wait(self, timeout: float) -> None:
        """Inside ``GET_LOCK`` until the server gives us the lock, or ``timeout``; a
        lock got here is granted in the same round trip, for the next try to return."""
        backend = self._backend
        conn = await self._connection()
        seconds = max(timeout, 0.0)
        params = self._params(seconds=seconds)
        try:
            sets = await backend.connections.run(
                conn, backend.statements.wait, params, seconds + WAIT_SLACK, waits=True
            )
        finally:
            if conn.closed:
                self._conn = None
        conn.fencelock_idle_limit = params["idle"]
        kept = _kept_for(sets)
        if kept is not None:  # woken into a kept name: nobody rings at a keep's end
            await asyncio.sleep(min(kept, seconds))
        elif sets[0][0][0] == 1:
            self._woken = sets

    @property
    def idle(self) -> bool:
        """Whether :meth:`close` has nothing to do (granted, or nothing asked or left in
        flight): the blocking face then skips a hop onto the loop."""
        conn = self._conn
        return self._sending is None and (conn is None or self._granted or conn.closed)

    async def close(self) -> None:
        sending, self._sending = self._sending, None
        if sending is not None:  # a try cancelled in flight: wait for what it did
            with contextlib.suppress(Exception):
                await sending
        conn, self._conn = self._conn, None
        if conn is None or self._granted or conn.closed:
            return
        # A lock a wait got but no try turned into a lease: let it go before reuse.
        try:
            await self._backend.connections.run(
                conn,
                self._backend.statements.release,
                {"lock": self._lock},
                self._backend.options.timeout,
            )
        except Exception:
            return
        await self._backend.connections.checkin(conn)
