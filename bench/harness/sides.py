"""One library's client inside a worker process: fencelock's, or a backend's peer's.

A side opens its client once and hands out a lock object per name, each with a blocking
``acquire()`` (bounded by :data:`ACQUIRE_TIMEOUT`: it raises when it gives up) and a
``release()``. The peers, per backend (:data:`PEERS`): redis-py's ``Lock``; aioredlock
and redlock-py over the five Redlock nodes; python-etcd3's ``Lock``; kazoo's ``Lock``;
tooz's PostgreSQL driver (``pg_advisory_lock``) beside both PostgreSQL backends, tooz's
MySQL driver (``GET_LOCK``) beside MariaDB; and beside those, the bare statements on a
kept connection (``bare-pg``, ``bare-mysql``), the steady yardstick of the server-CPU
check.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import fencelock
from harness.lockers import NotAcquired, PeerLocker
from harness.servers import hosts

TTL = 30.0
ETCD_PEER_TTL = 2  # python-etcd3 leaks an etcd lease per cycle; etcd's shortest TTL expires it soon
ACQUIRE_TIMEOUT = 10.0
REDLOCK_NODE_TIMEOUT = 0.1  # fencelock's per-node Redlock timeout (as redis_bench.py's)


class Lockable(Protocol):
    def acquire(self) -> object: ...

    def release(self) -> None: ...


class Side(Protocol):
    """One library's client in a worker: a lock object per name."""

    def lock(self, name: str) -> Lockable: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Peer:
    """A backend's peer library: its key (the side's name), label and what it needs.
    ``steady``: its cost a cycle holds still between runs, so a ratio to it can be a
    regression check's baseline (tooz's SQL drivers open a connection a cycle, whose
    fork and login move by 15-40 % from run to run)."""

    key: str
    label: str
    module: str  # imported to see whether it is installed here
    distribution: str
    steady: bool = True


TOOZ_PG = Peer("tooz-pg", "tooz pgsql", "psycopg2", "tooz", steady=False)
# No library: the session advisory lock's two statements on one kept psycopg connection.
BARE_PG = Peer("bare-pg", "bare advisory lock", "psycopg", "psycopg")
BARE_MYSQL = Peer("bare-mysql", "bare GET_LOCK", "pymysql", "pymysql")  # likewise
PEERS: dict[str, tuple[Peer, ...]] = {
    "redis": (Peer("redis-py", "redis-py Lock", "redis", "redis"),),
    "redlock": (
        Peer("aioredlock", "aioredlock", "aioredlock", "aioredlock"),
        Peer("redlock-py", "redlock-py", "redlock", "redlock-py"),
    ),
    "etcd": (Peer("python-etcd3", "python-etcd3 Lock", "etcd3", "etcd3"),),
    "zookeeper": (Peer("kazoo", "kazoo Lock", "kazoo", "kazoo"),),
    "postgresql": (TOOZ_PG, BARE_PG),
    "postgresql-advisory": (TOOZ_PG, BARE_PG),
    "mysql": (Peer("tooz-mysql", "tooz mysql", "pymysql", "tooz", steady=False), BARE_MYSQL),
}


# --------------------------------------------------------------------------- fencelock


class FencelockLock:
    def __init__(self, lock: fencelock.Lock) -> None:
        self._lock = lock
        self._lease: fencelock.Lease | None = None

    def acquire(self) -> None:
        self._lease = self._lock.acquire(timeout=ACQUIRE_TIMEOUT)

    def release(self) -> None:
        if self._lease is not None:
            self._lease.release()


class FencelockSide:
    def __init__(self, url: str) -> None:
        self._client = fencelock.connect(url)

    def lock(self, name: str) -> Lockable:
        return FencelockLock(self._client.lock(name, ttl=TTL))

    def close(self) -> None:
        self._client.close()


# --------------------------------------------------------------------------- the peers


def peer_lock(lock: Any, **acquire: float) -> Lockable:
    """A peer's lock object, whose ``acquire`` returns False when it times out."""
    return PeerLocker(lock, lambda: None, "peer lock", **acquire)


class RedisPySide:
    def __init__(self, url: str) -> None:
        import redis

        self._client = redis.Redis.from_url(url)

    def lock(self, name: str) -> Lockable:
        # redis-py's own default: a refused acquire sleeps 0.1 s before it asks again
        lock = self._client.lock(f"peer/{name}", timeout=TTL)
        return peer_lock(lock, blocking_timeout=ACQUIRE_TIMEOUT)

    def close(self) -> None:
        self._client.close()


class KazooSide:
    def __init__(self, url: str) -> None:
        from kazoo.client import KazooClient

        self._client = KazooClient(hosts=hosts(url))
        self._client.start(30)

    def lock(self, name: str) -> Lockable:
        return peer_lock(self._client.Lock(f"/bench-clients/{name}"), timeout=ACQUIRE_TIMEOUT)

    def close(self) -> None:
        self._client.stop()
        self._client.close()


class Etcd3Side:
    def __init__(self, url: str) -> None:
        import etcd3  # type: ignore[import-untyped]

        host, port = hosts(url).rsplit(":", 1)
        self._client = etcd3.client(host=host, port=int(port))

    def lock(self, name: str) -> Lockable:
        lock = self._client.lock(f"peer/{name}", ttl=ETCD_PEER_TTL)
        return peer_lock(lock, timeout=ACQUIRE_TIMEOUT)

    def close(self) -> None:
        # A watch thread python-etcd3 started for a waiter may still be opening its stream
        # and die on the closed channel with a traceback: the process is ending anyway.
        threading.excepthook = lambda hooked: None
        self._client.close()


def redlock_nodes(url: str) -> list[dict[str, Any]]:
    """``redlock://h1:p1,h2:p2,...`` as the Redlock peers take their nodes."""
    return [
        {"host": host, "port": int(port)}
        for host, port in (node.rsplit(":", 1) for node in hosts(url).split(","))
    ]


class Retried:
    """A Redlock peer's lock: its own few retries, asked again until ACQUIRE_TIMEOUT (both
    peers give up after three tries, 0.1-0.3 s apart, where a waiter here waits on)."""

    def __init__(self, take: Callable[[], object], give: Callable[[object], None]) -> None:
        self._take, self._give = take, give
        self._held: object = None

    def acquire(self) -> None:
        deadline = time.monotonic() + ACQUIRE_TIMEOUT
        while (held := self._take()) is None:
            if time.monotonic() >= deadline:
                raise NotAcquired(f"not acquired within {ACQUIRE_TIMEOUT:g} s")
        self._held = held

    def release(self) -> None:
        if self._held is not None:
            held, self._held = self._held, None
            self._give(held)


class RedlockPySide:
    def __init__(self, url: str) -> None:
        import redlock  # type: ignore[import-untyped]

        self._manager = redlock.Redlock(redlock_nodes(url))

    def lock(self, name: str) -> Lockable:
        def take() -> object:
            held = self._manager.lock(f"peer/{name}", int(TTL * 1000))
            return held or None

        return Retried(take, self._manager.unlock)

    def close(self) -> None:
        pass


class AioredlockSide:
    """aioredlock on an event loop of the worker's own, run for each call."""

    def __init__(self, url: str) -> None:
        import aioredlock  # type: ignore[import-untyped]

        # it logs each node it could not unlock on the way out: errors count in the tables
        logging.getLogger("aioredlock").addHandler(logging.NullHandler())
        logging.getLogger("aioredlock").propagate = False
        self._loop = asyncio.new_event_loop()
        self._manager = aioredlock.Aioredlock(redlock_nodes(url))
        self._refused = aioredlock.LockError

    def lock(self, name: str) -> Lockable:
        def take() -> object:
            try:
                return self._loop.run_until_complete(self._manager.lock(f"peer/{name}", TTL))
            except self._refused:
                return None

        def give(held: object) -> None:
            self._loop.run_until_complete(self._manager.unlock(held))

        return Retried(take, give)

    def close(self) -> None:
        try:
            self._loop.run_until_complete(self._manager.destroy())
        finally:
            self._loop.close()


class ToozSide:
    """tooz's SQL coordinator (a new connection per acquire, as its drivers do). On
    MySQL the acquire waits in the server (``GET_LOCK(name, seconds)``), not tooz's 1 s
    polling; on PostgreSQL ``pg_advisory_lock`` waits there anyway."""

    def __init__(self, url: str) -> None:
        from tooz import coordination

        url = url.replace("postgresql+advisory://", "postgresql://", 1)
        with warnings.catch_warnings():  # "PostgreSQL driver is deprecated"
            warnings.simplefilter("ignore", DeprecationWarning)
            self._coordinator = coordination.get_coordinator(url, uuid.uuid4().hex.encode())
        self._coordinator.start()
        self._blocking: bool | float = ACQUIRE_TIMEOUT if url.startswith("mysql") else True

    def lock(self, name: str) -> Lockable:
        lock = self._coordinator.get_lock(f"peer/{name}".encode())
        return peer_lock(lock, blocking=self._blocking)

    def close(self) -> None:
        self._coordinator.stop()


class BareSide:
    """A database's own lock statements on one kept connection, with no library around
    them: what the statements alone cost (``take`` answers 1 once the lock is taken)."""

    def __init__(self, conn: Any, take: str, give: str) -> None:
        self._conn, self._take, self._give = conn, take, give

    def lock(self, name: str) -> Lockable:
        return BareLock(self, f"peer/{name}")

    def take(self, key: str) -> bool:
        return self._run(self._take, key) == 1

    def give(self, key: str) -> None:
        self._run(self._give, key)

    def _run(self, statement: str, key: str) -> object:
        with self._conn.cursor() as cursor:
            cursor.execute(statement, (key,))
            return cursor.fetchone()[0]

    def close(self) -> None:
        self._conn.close()


class BareLock:
    def __init__(self, side: BareSide, key: str) -> None:
        self._side, self._key = side, key

    def acquire(self) -> object:
        if not self._side.take(self._key):
            raise NotAcquired(f"not acquired within {ACQUIRE_TIMEOUT:g} s")
        return True

    def release(self) -> None:
        self._side.give(self._key)


def bare_advisory(url: str) -> BareSide:
    """``pg_advisory_lock`` and ``pg_advisory_unlock`` (session locks) over psycopg."""
    import psycopg

    plain = url.replace("postgresql+advisory://", "postgresql://", 1).split("?", 1)[0]
    take = "SELECT 1 FROM pg_advisory_lock(hashtext(%s))"
    return BareSide(
        psycopg.connect(plain, autocommit=True), take, "SELECT pg_advisory_unlock(hashtext(%s))"
    )


def bare_get_lock(url: str) -> BareSide:
    """``GET_LOCK`` and ``RELEASE_LOCK`` over PyMySQL."""
    from urllib.parse import urlsplit

    import pymysql

    parts = urlsplit(url)
    conn = pymysql.connect(
        host=parts.hostname,
        port=parts.port or 3306,
        user=parts.username,
        password=parts.password or "",
        database=parts.path.lstrip("/") or None,
        autocommit=True,
    )
    take = f"SELECT GET_LOCK(%s, {ACQUIRE_TIMEOUT:g})"
    return BareSide(conn, take, "SELECT RELEASE_LOCK(%s)")


OPENERS: dict[str, Callable[[str], Side]] = {
    "fencelock": FencelockSide,
    "redis-py": RedisPySide,
    "aioredlock": AioredlockSide,
    "redlock-py": RedlockPySide,
    "python-etcd3": Etcd3Side,
    "kazoo": KazooSide,
    "tooz-pg": ToozSide,
    "bare-pg": bare_advisory,
    "bare-mysql": bare_get_lock,
    "tooz-mysql": ToozSide,
}


def open_side(side: str, url: str) -> Side:
    """``fencelock`` or a peer's key (:data:`PEERS`), its client connected to ``url``."""
    return OPENERS[side](url)
