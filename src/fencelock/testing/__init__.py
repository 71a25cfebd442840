"""Throwaway lock servers, for the tests, ``fencelock check --servers`` and the benchmarks.

Not for production: each server runs on a free loopback port in a directory of its
own, without persistence, and is stopped by its PID. One small class per kind of
server (``redis.py``; ``pool.KINDS`` lists them) on one shared life cycle
(``process.py``)::

    with ServerPool.under(tmp) as pool:
        server = pool.redis()               # ready: it answered PING
        fencelock.connect(server.url)
        server.pause(); server.resume()     # SIGSTOP / SIGCONT
        server.kill(); server.start()       # SIGKILL, then again on the same port

``pytest_plugin.py`` adds the servers' logs to a failing test's report.
"""

from __future__ import annotations

from fencelock.testing.etcd import EtcdServer
from fencelock.testing.mariadb import MariaDBServer
from fencelock.testing.pgbouncer import PgBouncerServer
from fencelock.testing.pool import KINDS, ServerPool
from fencelock.testing.postgresql import PostgreSQLServer
from fencelock.testing.process import ServerProcess, started_servers
from fencelock.testing.redis import RedisServer
from fencelock.testing.tls import TLSFiles, make_certificates
from fencelock.testing.tools import (
    FakeClock,
    ServerStartError,
    ToolMissing,
    faketime_preload,
    free_port,
    require_binary,
)
from fencelock.testing.waiters import set_waiter_timing, waiter_timing
from fencelock.testing.zookeeper import ZooKeeperServer

__all__ = [
    "KINDS",
    "EtcdServer",
    "FakeClock",
    "MariaDBServer",
    "PgBouncerServer",
    "PostgreSQLServer",
    "RedisServer",
    "ServerPool",
    "ServerProcess",
    "ServerStartError",
    "TLSFiles",
    "ToolMissing",
    "ZooKeeperServer",
    "faketime_preload",
    "free_port",
    "make_certificates",
    "require_binary",
    "set_waiter_timing",
    "started_servers",
    "waiter_timing",
]
