"""What the check harness runs besides its clients: lock servers, fault proxies, a reaper.

* :class:`ServerSet`: the lock servers on free loopback ports: ``redis-server``
  processes (:class:`RedisNode`, a :class:`fencelock.testing.RedisServer` with a name
  and maybe a fake clock; 1 for ``--servers redis``, 5 for ``--servers redlock``, each
  optionally under libfaketime so the clock nemesis can step its wall clock), or a
  3-member etcd cluster or ZooKeeper ensemble (``--servers etcd|zookeeper``), or one
  database server (``--servers postgresql|advisory|mysql``: PostgreSQL 15 for the
  lease table or its advisory locks, MariaDB for named locks).
* :class:`ProxyHub`: one TCP proxy per (client, server) link, so the partition
  nemesis can cut one client off from every server (black hole: bytes are
  swallowed, nothing is forwarded, closes are held back until the link heals).
* :class:`Reaper`: a tiny watchdog process that SIGKILLs every process the
  harness started if the harness itself dies, even by SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit, urlunsplit

from fencelock.errors import ConfigError
from fencelock.testing import (
    FakeClock,
    RedisServer,
    ServerPool,
    ToolMissing,
    faketime_preload,
    free_port,
    require_binary,
)
from fencelock.testing.process import ServerProcess

__all__ = [
    "NODES",
    "ProxyHub",
    "Reaper",
    "RedisNode",
    "ServerKind",
    "ServerSet",
    "ToolMissing",
    "faketime_preload",
    "free_port",
    "proxied_url",
    "reaper",
    "require_binary",
]

ServerKind = Literal["redis", "redlock", "etcd", "zookeeper", "postgresql", "advisory", "mysql"]
T = TypeVar("T")
NODES = {
    "redis": 1,
    "redlock": 5,
    "etcd": 3,
    "zookeeper": 3,
    "postgresql": 1,
    "advisory": 1,
    "mysql": 1,
}
CONSENSUS = ("etcd", "zookeeper")  # clusters: a member restarts with its data
DATABASES = ("postgresql", "advisory", "mysql")  # one server; it restarts with its data


class RedisNode(RedisServer):
    """One ``redis-server`` of a run, named ``name``, logging to ``workdir/NAME.log``.

    ``faketime``: run it under libfaketime, its wall clock offset by the seconds in
    ``workdir/NAME.faketime`` (``step_clock``); monotonic clocks stay real.
    """

    def __init__(self, workdir: Path, name: str, *, faketime: bool = False) -> None:
        clock = FakeClock(workdir / f"{name}.faketime") if faketime else None
        super().__init__(workdir, name=name, clock=clock)


@dataclass
class ServerSet:
    """The lock servers of one run: ``url`` reaches them all."""

    kind: ServerKind
    nodes: list[ServerProcess] = field(default_factory=list)
    timeout: float = 2.0
    url: str = ""

    @classmethod
    def start(cls, kind: ServerKind, workdir: Path, *, faketime: bool, timeout: float) -> ServerSet:
        """Start the servers of ``kind``; stops the started ones if one fails."""
        if kind in CONSENSUS or kind in DATABASES:
            return cls._pooled(kind, workdir, faketime=faketime, timeout=timeout)
        if faketime:
            faketime_preload()  # fail before starting anything
        servers = cls(kind, timeout=timeout)
        try:
            for n in range(1, NODES[kind] + 1):
                node = RedisNode(workdir, f"redis-{n}", faketime=faketime)
                servers.nodes.append(node)  # listed first: stopped even if its start fails
                node.start()
        except BaseException:
            servers.stop()
            raise
        hosts = ",".join(node.address for node in servers.nodes)
        servers.url = (
            f"redis://{hosts}/0?timeout={timeout:g}"
            if kind == "redis"
            else f"redlock://{hosts}"  # the backend's own short per-node timeout
        )
        return servers

    @classmethod
    def _pooled(
        cls, kind: ServerKind, workdir: Path, *, faketime: bool, timeout: float
    ) -> ServerSet:
        """An etcd cluster, a ZooKeeper ensemble or a database server, from a ServerPool."""
        if faketime:
            raise ConfigError(_no_fake_clock(kind))
        pool = ServerPool.under(workdir)
        try:
            servers = _start_pooled(pool, kind)
        except BaseException:
            pool.stop_all()
            raise
        return cls(kind, servers, timeout=timeout, url=_pooled_url(kind, servers[0].url, timeout))

    def pids(self) -> list[int]:
        return [node.pid for node in self.nodes if node.pid is not None]

    def stop(self) -> None:
        for node in reversed(self.nodes):
            node.stop()


def _no_fake_clock(kind: ServerKind) -> str:
    """Why the clock nemesis cannot step the clock of a pooled ``kind``."""
    if kind in CONSENSUS:
        return (
            f"the clock nemesis cannot step {kind}'s clock: it expires leases and "
            "sessions by a monotonic clock, which a wall-clock step does not move "
            "(docs/safety.md)"
        )
    return (
        f"the clock nemesis cannot step the clock of --servers {kind} yet: the "
        "database server would have to run under libfaketime (docs/safety.md)"
    )


def _start_pooled(pool: ServerPool, kind: ServerKind) -> list[ServerProcess]:
    if kind == "etcd":
        return list(pool.etcd(NODES[kind]))
    if kind == "zookeeper":
        return list(pool.zookeeper(NODES[kind]))
    return [pool.mariadb() if kind == "mysql" else pool.postgresql()]


def _pooled_url(kind: ServerKind, url: str, timeout: float) -> str:
    """``url`` with the run's timeout: a request to a stalled server fails within the
    TTL (to a stalled etcd member, and the next goes elsewhere). kazoo leaves a stalled
    ZooKeeper member by itself, within the session timeout."""
    if kind == "zookeeper":
        return url
    url += f"?timeout={timeout:g}&connect_timeout={timeout:g}"
    if kind == "advisory":
        url = url.replace("postgresql://", "postgresql+advisory://", 1)
    return url


# --- partitions: a black-holing TCP proxy per client and server -------------------------


def proxied_url(url: str, addresses: list[tuple[str, int]]) -> str:
    """``url`` with its host list replaced by ``addresses`` (same order, same options)."""
    parts = urlsplit(url)
    userinfo, at, _ = parts.netloc.rpartition("@")
    hosts = ",".join(f"{host}:{port}" for host, port in addresses)
    return urlunsplit(parts._replace(netloc=f"{userinfo}{at}{hosts}"))


class _Link:
    """One client's links to every server: cut or healed together."""

    def __init__(self) -> None:
        self.cut = False
        self.healed = asyncio.Event()
        self.healed.set()
        self.writers: set[asyncio.StreamWriter] = set()


class ProxyHub:
    """TCP proxies on 127.0.0.1, one per (client, upstream), run on one asyncio thread.

    While a client's link is cut, its proxies forward nothing in either
    direction (the bytes are dropped, as a partition drops packets), still
    accept new connections (which then hear nothing) and hold back a close by
    either side until the link heals. The client sees replies stop: its
    socket timeouts fire, exactly as behind a dropped-packet firewall rule.
    """

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._links: dict[int, _Link] = {}
        self._servers: list[asyncio.base_events.Server] = []
        self._thread = threading.Thread(target=self._loop.run_forever, name="fencelock-proxy")
        self._thread.daemon = True
        self._thread.start()

    def route(self, client: int, upstreams: list[tuple[str, int]]) -> list[tuple[str, int]]:
        """Proxies for ``client`` to each upstream; their local addresses, in order."""
        return self._call(self._route(client, upstreams))

    def cut(self, client: int) -> None:
        self._call(self._set(client, cut=True))

    def heal(self, client: int) -> None:
        self._call(self._set(client, cut=False))

    def close(self) -> None:
        if self._loop.is_closed():
            return
        with contextlib.suppress(RuntimeError, TimeoutError):
            self._call(self._close_all())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    async def _route(self, client: int, upstreams: list[tuple[str, int]]) -> list[tuple[str, int]]:
        link = self._links.setdefault(client, _Link())
        out = []
        for host, port in upstreams:
            server = await asyncio.start_server(self._handler(link, host, port), "127.0.0.1", 0)
            self._servers.append(server)
            out.append(("127.0.0.1", int(server.sockets[0].getsockname()[1])))
        return out

    def _handler(
        self, link: _Link, host: str, port: int
    ) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await self._serve(link, reader, writer, host, port)

        return handle

    async def _set(self, client: int, *, cut: bool) -> None:
        link = self._links.setdefault(client, _Link())
        link.cut = cut
        if cut:
            link.healed.clear()
        else:
            link.healed.set()

    async def _close_all(self) -> None:
        for server in self._servers:
            server.close()
        for link in self._links.values():
            link.healed.set()
            for writer in list(link.writers):
                writer.close()

    async def _serve(
        self,
        link: _Link,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        host: str,
        port: int,
    ) -> None:
        link.writers.add(writer)
        try:
            try:
                up_reader, up_writer = await asyncio.open_connection(host, port)
            except OSError:
                return
            link.writers.add(up_writer)
            try:
                await asyncio.gather(
                    self._pump(link, reader, up_writer), self._pump(link, up_reader, writer)
                )
            finally:
                link.writers.discard(up_writer)
                up_writer.close()
        finally:
            link.writers.discard(writer)
            writer.close()

    @staticmethod
    async def _pump(
        link: _Link, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        with contextlib.suppress(OSError, asyncio.CancelledError):
            while True:
                data = await reader.read(65536)
                if not data:
                    await link.healed.wait()  # a close does not cross a partition either
                    break
                if link.cut:
                    continue  # dropped on the floor
                writer.write(data)
                await writer.drain()
        writer.close()


# --- the reaper ------------------------------------------------------------------------

_REAPER = """
import os, signal, sys
watched = set()
for line in sys.stdin:
    line = line.strip()
    if line.startswith('+'):
        watched.add(int(line[1:]))
    elif line.startswith('-'):
        watched.discard(int(line[1:]))
for pid in watched:
    for sig in (signal.SIGCONT, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except OSError:
            pass
"""


class Reaper:
    """A watchdog process: when the harness's pipe to it closes, it SIGKILLs what is left.

    The harness stops everything itself on a normal exit, on Ctrl-C and on
    SIGTERM; the reaper covers the one case it cannot: being killed outright.
    """

    def __init__(self) -> None:
        self._proc = subprocess.Popen(  # noqa: S603 (an argument list built here, no shell)
            [sys.executable, "-c", _REAPER],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            text=True,
        )
        self._guard = threading.Lock()

    def watch(self, pid: int) -> None:
        self._send(f"+{pid}")

    def unwatch(self, pid: int) -> None:
        self._send(f"-{pid}")

    def _send(self, line: str) -> None:
        with self._guard:
            if self._proc.stdin is not None and not self._proc.stdin.closed:
                with contextlib.suppress(OSError, ValueError):
                    self._proc.stdin.write(line + "\n")
                    self._proc.stdin.flush()

    def close(self) -> None:
        """Let the reaper exit (after the harness has unwatched what it stopped)."""
        with self._guard:
            if self._proc.stdin is not None:
                with contextlib.suppress(OSError):
                    self._proc.stdin.close()
        try:
            self._proc.wait(5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


@contextlib.contextmanager
def reaper() -> Iterator[Reaper]:
    r = Reaper()
    try:
        yield r
    finally:
        r.close()
