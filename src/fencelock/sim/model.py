"""Model servers, one per family of backend semantics (not per product): the
TTL-lease family (:class:`LeaseStore`) and the session family (:class:`SessionStore`).

:class:`LeaseStore` is the TTL-lease family (Redis, the SQL lease table, etcd's
leases): a lease is a record ``(owner, expiry, token)`` that ends by the server's own
clock, taken by compare-and-set, released by compare-and-delete, renewed by
compare-and-extend, its token from a per-name counter issued in the same step. The
server's clock may run at a rate other than the clients' (drift) and the server may
restart, keeping its data or not (then counters start again from the server's clock,
as the design says a backend without a durable counter must).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fencelock.engine import redlock as plan


@dataclass
class Record:
    owner: str
    expires: float  # the server's clock
    token: int


@dataclass
class GrantReply:
    token: int


@dataclass
class Taken:
    remaining: float  # the holder's, by the server's clock


@dataclass
class LeaseStore:
    """One server of the TTL-lease family; ``rate``: its clock's speed against true time."""

    rate: float = 1.0
    started: float = 0.0  # true time its clock counts from
    regrant: bool = False  # a holder's own try again: granted anew (PostgreSQL), or taken
    records: dict[str, Record] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    grants: list[tuple[str, str, int]] = field(default_factory=list)  # (name, owner, token)

    def clock(self, true_now: float) -> float:
        return (true_now - self.started) * self.rate

    def true_time(self, server_time: float) -> float:
        """When, in true time, the server's clock reads ``server_time``."""
        return self.started + server_time / self.rate

    def holder(self, name: str, true_now: float) -> Record | None:
        record = self.records.get(name)
        if record is None or record.expires <= self.clock(true_now):
            return None
        return record

    def acquire(self, name: str, owner: str, ttl: float, true_now: float) -> GrantReply | Taken:
        now = self.clock(true_now)
        held = self.holder(name, true_now)
        if held is not None and self.regrant and held.owner == owner:
            held.expires = now + ttl  # a resent try: the same lease, its TTL from now
            return GrantReply(held.token)
        if held is not None:
            return Taken(held.expires - now)
        token = max(self.counters.get(name, 0) + 1, int(now * 1_000_000))
        self.counters[name] = token
        self.records[name] = Record(owner, now + ttl, token)
        self.grants.append((name, owner, token))
        return GrantReply(token)

    def release(self, name: str, owner: str, true_now: float) -> bool:
        held = self.holder(name, true_now)
        if held is None or held.owner != owner:
            return False
        del self.records[name]
        return True

    def renew(self, name: str, owner: str, ttl: float, true_now: float) -> bool:
        held = self.holder(name, true_now)
        if held is None or held.owner != owner:
            return False
        held.expires = self.clock(true_now) + ttl
        return True

    def grant_until(self, name: str, owner: str, true_now: float) -> float | None:
        """Until when (true time) the server grants ``owner`` the lock; None: it does not."""
        held = self.holder(name, true_now)
        if held is None or held.owner != owner:
            return None
        return self.true_time(held.expires)

    def owners(self) -> set[str]:
        """Whom the server grants a lease now (expired records included: it cannot tell)."""
        return {record.owner for record in self.records.values()}

    def names(self) -> set[str]:
        return set(self.records)

    def force_end(self, name: str, true_now: float) -> set[str]:
        """An operator's forced release; the owners it ended."""
        held = self.holder(name, true_now)
        self.records.pop(name, None)
        return set() if held is None else {held.owner}

    def restart(self, keep_data: bool, true_now: float) -> None:
        """A restart: with its data (an AOF, a database), or empty."""
        if not keep_data:
            self.records.clear()
            self.counters.clear()


@dataclass
class SessionLock:
    owner: str
    session: int
    token: int


@dataclass
class SessionStore:
    """One server of the session family (ZooKeeper, MySQL's named locks, PostgreSQL's
    advisory locks): a lock lives in its holder's session, which lives while its client
    pings it within the session's timeout (by the server's clock) and ends the moment
    it expires or the server kills it; every lock in it ends with it.

    A restart: ZooKeeper keeps its sessions in its log, so they outlive a restart with
    its data (``durable_sessions``); MySQL's and PostgreSQL's sessions are connections,
    which every restart ends (``durable_sessions=False``: a kill and restart of either
    server ends every lock, its data kept or not). So with the default, a restart
    without data is what any MySQL or PostgreSQL restart does. Tokens come from one
    counter that a restart keeps (a sequence, a counter row, the zxid: each kept with
    the server's data; tests/contract/test_models_match_servers.py holds the servers to
    this model as sessions expire and as a server is killed)."""

    rate: float = 1.0
    started: float = 0.0
    durable_sessions: bool = True  # ZooKeeper's (in its log); False: MySQL's, PostgreSQL's
    sessions: dict[int, float] = field(default_factory=dict)  # id: expiry (server clock)
    timeouts: dict[int, float] = field(default_factory=dict)
    locks: dict[str, SessionLock] = field(default_factory=dict)
    counter: int = 0  # one for the whole store, as ZooKeeper's zxid
    grants: list[tuple[str, str, int]] = field(default_factory=list)
    next_session: int = 1
    clients: dict[int, Any] = field(default_factory=dict)  # session: its client's backend

    def clock(self, true_now: float) -> float:
        return (true_now - self.started) * self.rate

    def true_time(self, server_time: float) -> float:
        return self.started + server_time / self.rate

    def _expire(self, true_now: float) -> None:
        now = self.clock(true_now)
        for session in [s for s, ends in self.sessions.items() if ends <= now]:
            self.end_session(session)

    def end_session(self, session: int) -> None:
        self.sessions.pop(session, None)
        for name in [n for n, lock in self.locks.items() if lock.session == session]:
            del self.locks[name]

    def open_session(self, timeout: float, true_now: float) -> int:
        session, self.next_session = self.next_session, self.next_session + 1
        self.sessions[session] = self.clock(true_now) + timeout
        self.timeouts[session] = timeout
        return session

    def ping(self, session: int, true_now: float) -> bool:
        """A request on ``session`` keeps it alive; False if it has ended."""
        self._expire(true_now)
        if session not in self.sessions:
            return False
        self.sessions[session] = self.clock(true_now) + self.timeouts[session]
        return True

    def holder(self, name: str, true_now: float) -> SessionLock | None:
        self._expire(true_now)
        return self.locks.get(name)

    def acquire(
        self, name: str, owner: str, session: int, true_now: float
    ) -> GrantReply | Taken | None:
        """The lock, or who has it; None if ``session`` has ended."""
        if not self.ping(session, true_now):
            return None
        held = self.locks.get(name)
        if held is not None:
            ends = self.sessions.get(held.session, 0.0)
            return Taken(ends - self.clock(true_now))
        self.counter += 1
        self.locks[name] = SessionLock(owner, session, self.counter)
        self.grants.append((name, owner, self.counter))
        return GrantReply(self.counter)

    def release(self, name: str, owner: str, session: int, true_now: float) -> bool:
        self.ping(session, true_now)
        held = self.locks.get(name)
        if held is None or held.owner != owner:
            return False
        del self.locks[name]
        return True

    def grant_until(self, name: str, owner: str, true_now: float) -> float | None:
        """Until when (true time) the server grants ``owner`` the lock; None: it does not."""
        held = self.holder(name, true_now)
        if held is None or held.owner != owner:
            return None
        return self.true_time(self.sessions[held.session])

    def owners(self) -> set[str]:
        return {lock.owner for lock in self.locks.values()}

    def names(self) -> set[str]:
        return set(self.locks)

    def force_end(self, name: str, true_now: float) -> set[str]:
        """The server kills the holder's session (an operator, a revoked lease): every
        lock in it ends; the owners it ended."""
        held = self.holder(name, true_now)
        if held is None:
            return set()
        ended = {lock.owner for lock in self.locks.values() if lock.session == held.session}
        self.end_session(held.session)
        return ended

    def restart(self, keep_data: bool, true_now: float, down_since: float | None = None) -> None:
        """The server killed at ``down_since`` (by default: now) and back at ``true_now``.
        A session that had expired by the kill stays ended. Durable sessions survive a
        restart with data, each timed afresh from ``true_now``, as ZooKeeper's session
        tracker does when it loads them (nobody counted a client's silence while the
        servers were down); other sessions, and every one without the data, end, and
        every lock in them."""
        self._expire(true_now if down_since is None else down_since)
        if not keep_data or not self.durable_sessions:
            self.sessions.clear()
            self.locks.clear()
            return
        now = self.clock(true_now)
        for session in self.sessions:
            self.sessions[session] = now + self.timeouts[session]


@dataclass
class RedlockNode:
    """One of Redlock's independent Redis masters, as its scripts see it: keys with a
    TTL by the node's own clock, and a token counter per name (seeded from the clock
    after a restart without data, as redlock_phase1.lua does)."""

    rate: float = 1.0
    started: float = 0.0
    keys: dict[str, tuple[str, float]] = field(default_factory=dict)  # owner, expiry
    counters: dict[str, int] = field(default_factory=dict)

    def clock(self, true_now: float) -> float:
        return (true_now - self.started) * self.rate

    def true_time(self, node_time: float) -> float:
        return self.started + node_time / self.rate

    def _key(self, name: str, true_now: float) -> tuple[str, float] | None:
        key = self.keys.get(name)
        if key is None or key[1] <= self.clock(true_now):
            self.keys.pop(name, None)
            return None
        return key

    def peek(self, name: str, true_now: float) -> plan.NodeView:
        """The key's owner, its PTTL (ms) and the name's token, as the real inspect reads
        them (GET, PTTL, GET of the token key)."""
        key = self._key(name, true_now)
        token = self.counters.get(name)
        if key is None:
            return None, -2, token
        return key[0], int((key[1] - self.clock(true_now)) * 1000), token

    def names_under(self, prefix: str) -> list[str]:
        """The names this node has a key or a token for under ``prefix`` (a SCAN), sorted:
        a set's order (and its repr in the trace) would follow ``PYTHONHASHSEED``."""
        return sorted({name for name in (*self.keys, *self.counters) if name.startswith(prefix)})

    def phase_one(
        self, name: str, owner: str, ttl: float, true_now: float
    ) -> int | tuple[float, str]:
        """Our key set: the counter; else the holder's remaining TTL and owner."""
        now = self.clock(true_now)
        key = self._key(name, true_now)
        if key is not None:
            return (key[1] - now, key[0])
        self.keys[name] = (owner, now + ttl)
        return max(self.counters.get(name, 0), int(now * 1_000_000))  # read, not stored

    def phase_two(self, name: str, owner: str, token: int, true_now: float) -> bool:
        key = self._key(name, true_now)
        if key is None or key[0] != owner:
            return False
        self.counters[name] = max(self.counters.get(name, 0), token)
        return True

    def renew(self, name: str, owner: str, ttl: float, true_now: float) -> bool:
        key = self._key(name, true_now)
        if key is None or key[0] != owner:
            return False
        self.keys[name] = (owner, self.clock(true_now) + ttl)
        return True

    def release(self, name: str, owner: str, true_now: float) -> bool:
        key = self._key(name, true_now)
        if key is None or key[0] != owner:
            return False
        del self.keys[name]
        return True

    def until(self, name: str, owner: str, true_now: float) -> float | None:
        """True time ``owner``'s key here ends; None if it holds none."""
        key = self._key(name, true_now)
        return None if key is None or key[0] != owner else self.true_time(key[1])


@dataclass
class RedlockNodes:
    """N independent nodes: the lock is ``owner``'s while a quorum has its key."""

    nodes: list[RedlockNode]

    @property
    def quorum(self) -> int:
        return len(self.nodes) // 2 + 1

    def grant_until(self, name: str, owner: str, true_now: float) -> float | None:
        ends = sorted(
            (until for node in self.nodes if (until := node.until(name, owner, true_now))),
            reverse=True,
        )
        return ends[self.quorum - 1] if len(ends) >= self.quorum else None

    def holder(self, name: str, true_now: float) -> str | None:
        owners: dict[str, int] = {}
        for node in self.nodes:
            key = node._key(name, true_now)
            if key is not None:
                owners[key[0]] = owners.get(key[0], 0) + 1
        return next((o for o, count in owners.items() if count >= self.quorum), None)

    def owners(self) -> set[str]:
        return {key[0] for node in self.nodes for key in node.keys.values()}

    def names(self) -> set[str]:
        return {name for node in self.nodes for name in node.keys}

    def force_end(self, name: str, true_now: float) -> set[str]:
        held = self.holder(name, true_now)
        for node in self.nodes:
            node.keys.pop(name, None)
        return set() if held is None else {held}

    def restart(self, keep_data: bool, true_now: float, which: int = 0) -> None:
        """Node ``which`` restarts, with its data (an AOF) or without."""
        if not keep_data:
            self.nodes[which].keys.clear()
            self.nodes[which].counters.clear()
