"""A pool of throwaway servers, each in a fresh directory, all stopped together.

``KINDS`` maps a kind's name to its class; a new backend's server (PostgreSQL, MariaDB)
is one more entry. etcd and ZooKeeper run as clusters of loopback members
(:meth:`ServerPool.cluster`: launched together, ready together). A pool registers a
server before starting it, so :meth:`ServerPool.stop_all` stops it even when its start
failed half-way.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from fencelock.testing.etcd import EtcdServer
from fencelock.testing.mariadb import MariaDBServer
from fencelock.testing.pgbouncer import PgBouncerServer
from fencelock.testing.postgresql import PostgreSQLServer
from fencelock.testing.process import READY_TIMEOUT, ServerProcess
from fencelock.testing.redis import CLUSTER_NODE_OPTIONS, RedisServer, create_cluster
from fencelock.testing.tls import TLSFiles
from fencelock.testing.tools import free_port
from fencelock.testing.zookeeper import ZooKeeperServer

KINDS: dict[str, type[ServerProcess]] = {
    "redis": RedisServer,
    "etcd": EtcdServer,
    "zookeeper": ZooKeeperServer,
    "postgresql": PostgreSQLServer,
    "mariadb": MariaDBServer,
    "pgbouncer": PgBouncerServer,
}
ClusterMember = EtcdServer | ZooKeeperServer

S = TypeVar("S", bound=ServerProcess)
C = TypeVar("C", EtcdServer, ZooKeeperServer)


def numbered_directory(base: Path, name: str) -> Path:
    """A new directory ``base/name``, or ``base/name-1``, ``-2``… if that one exists."""
    base.mkdir(parents=True, exist_ok=True)
    for n in range(10_000):
        path = base / (name if n == 0 else f"{name}-{n}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise RuntimeError(f"no free directory name for {name!r} under {base}")


class ServerPool:
    """Starts servers in fresh directories made by ``workdirs(name)``; stops every one.

    In pytest, ``ServerPool(tmp_path_factory.mktemp)``; elsewhere
    ``ServerPool.under(directory)``. Usable as a context manager.
    """

    def __init__(self, workdirs: Callable[[str], Path]) -> None:
        self._workdirs = workdirs
        self.servers: list[ServerProcess] = []

    @classmethod
    def under(cls, base: Path) -> ServerPool:
        """A pool whose servers live in new subdirectories of ``base``."""
        return cls(lambda name: numbered_directory(base, name))

    def workdir(self, name: str) -> Path:
        """A fresh directory for a server (or anything a test writes beside it)."""
        return self._workdirs(name)

    def add(self, server: S) -> S:
        """Start ``server`` and stop it with the pool (registered first)."""
        self.servers.append(server)
        server.start()
        return server

    def start(
        self, kind: str, *args: Any, name: str | None = None, **options: Any
    ) -> ServerProcess:
        """Start a server of ``kind`` (a key of KINDS) in a fresh directory."""
        cls = KINDS[kind]
        workdir = self.workdir(name or kind)
        return self.add(cls(workdir, *args, name=name, **options))

    def redis(
        self,
        *extra: str,
        name: str = "redis",
        port: int | None = None,
        tls: TLSFiles | None = None,
    ) -> RedisServer:
        """Start a ``redis-server`` with ``extra`` options (see :class:`RedisServer`)."""
        server = RedisServer(self.workdir(name), *extra, name=name, port=port, tls=tls)
        return self.add(server)

    def redis_cluster(
        self, masters: int = 3, replicas: int = 0, name: str = "redis-cluster"
    ) -> list[RedisServer]:
        """Start a Redis Cluster: ``masters`` nodes sharing the 16,384 slots, each with
        ``replicas`` replicas (a replica is promoted 1 s after its master falls silent);
        ready once every node says ``cluster_state:ok``. Masters first in the list."""
        nodes = [
            self.redis(
                *CLUSTER_NODE_OPTIONS, "--cluster-port", str(free_port()), name=f"{name}-{i}"
            )
            for i in range(masters * (1 + replicas))
        ]
        create_cluster(nodes, replicas)
        return nodes

    def etcd(
        self, members: int = 1, name: str = "etcd", tls: TLSFiles | None = None
    ) -> list[EtcdServer]:
        """Start an etcd cluster of ``members`` (each ``NAME-i``; clients on TLS with ``tls``);
        ready once it has a leader."""
        cluster = [
            EtcdServer(self.workdir(f"{name}-{i}"), name=f"{name}-{i}", tls=tls)
            for i in range(members)
        ]
        return self.cluster(cluster)

    def postgresql(self, name: str = "postgresql") -> PostgreSQLServer:
        """Start a PostgreSQL 15 cluster (see :class:`PostgreSQLServer`)."""
        return self.add(PostgreSQLServer(self.workdir(name), name=name))

    def mariadb(self, name: str = "mariadb") -> MariaDBServer:
        """Start a MariaDB 10.11 server (see :class:`MariaDBServer`)."""
        return self.add(MariaDBServer(self.workdir(name), name=name))

    def pgbouncer(
        self,
        upstream: PostgreSQLServer,
        pool_mode: str = "transaction",
        name: str = "pgbouncer",
    ) -> PgBouncerServer:
        """Start PgBouncer in front of ``upstream`` (see :class:`PgBouncerServer`)."""
        server = PgBouncerServer(self.workdir(name), upstream, pool_mode=pool_mode, name=name)
        return self.add(server)

    def zookeeper(self, members: int = 1, name: str = "zookeeper") -> list[ZooKeeperServer]:
        """Start a ZooKeeper ensemble of ``members`` (standalone if 1); ready with a quorum."""
        ensemble = [
            ZooKeeperServer(self.workdir(f"{name}-{i}"), name=f"{name}-{i}", myid=i + 1)
            for i in range(members)
        ]
        return self.cluster(ensemble)

    def cluster(self, members: list[C], timeout: float = 4 * READY_TIMEOUT) -> list[C]:
        """Launch every member (each knowing the others), then wait for each to be ready."""
        for member in members:
            member.members = list(members)
            self.servers.append(member)
        for member in members:
            member.launch()
        for member in members:
            member.wait_ready(timeout)
        return members

    def logs(self) -> str:
        """The tail of every server's log, each under its name."""
        return "\n".join(f"--- {s.name} ---\n{s.log()}" for s in self.servers)

    def stop_all(self) -> None:
        """Stop every server of the pool, the last started first."""
        for server in reversed(self.servers):
            server.stop()

    def __enter__(self) -> ServerPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop_all()
