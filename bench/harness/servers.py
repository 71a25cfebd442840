"""The servers a benchmark runs against: started in a temporary directory, stopped after."""

from __future__ import annotations

import contextlib
import math
import os
import signal
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from fencelock.testing import ServerPool

BACKENDS = ("memory", "sqlite", "redis", "zookeeper", "etcd", "postgresql", "mysql")


@contextlib.contextmanager
def server_pool(prefix: str = "fencelock-bench-") -> Iterator[tuple[ServerPool, Path]]:
    """A :class:`ServerPool` under a temporary directory; every server stopped on the way
    out, on Ctrl-C and on SIGTERM too."""
    with (
        terminated_by_sigterm(),
        tempfile.TemporaryDirectory(prefix=prefix) as tmp,
        ServerPool.under(Path(tmp)) as pool,
    ):
        yield pool, Path(tmp)


def backend_url(pool: ServerPool, tmp: Path, backend: str, name: str = "bench") -> str:
    """A URL of ``backend``, its server started in ``pool`` (sqlite: a file in ``tmp``)."""
    if backend == "memory":
        return f"memory://{name}"
    if backend == "sqlite":
        return f"sqlite:///{tmp}/{name}.db"
    if backend == "redis":
        return pool.redis().url
    if backend == "redis-cluster":
        return f"redis+cluster://{pool.redis_cluster(3)[0].address}"
    if backend == "zookeeper":
        return pool.zookeeper(1)[0].url
    if backend == "etcd":
        return pool.etcd(1)[0].url
    if backend == "postgresql":
        return pool.postgresql().url
    if backend == "mysql":
        return pool.mariadb().url
    raise SystemExit(f"--backends: no such backend {backend!r}")


def hosts(url: str) -> str:
    """``host:port[,...]`` of a URL, as kazoo and the other peers take it."""
    return url.split("//", 1)[1].split("/", 1)[0].split("?", 1)[0]


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process, every thread (Linux ``/proc``); nan elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return math.nan
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_tree_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and every child it forked, the exited ones
    included (Linux ``/proc``; nan elsewhere): its own time and its reaped children's
    (``cutime``, ``cstime``), and each live child's own and reaped children's. For
    PostgreSQL's postmaster: the whole cluster, the backends of connections that closed
    included once the postmaster has reaped them (it does at once)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # exited while we looked
            continue
        if stat.parent.name == str(pid) or fields[1] == str(pid):  # itself, or its child
            total += sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    return total / tick if total else math.nan


def redis_cpu_seconds(url: str) -> Callable[[], float]:
    """A Redis server's own CPU seconds so far, as it reports them (``INFO cpu``: its main
    process's user + system time, every thread)."""
    import redis

    client = redis.Redis.from_url(url)

    def used() -> float:
        info: Any = client.info("cpu")
        return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])

    return used


@contextlib.contextmanager
def terminated_by_sigterm() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so the servers are stopped either way."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
