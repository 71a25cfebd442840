"""ZooKeeper as a throwaway server: standalone, or a member of a loopback ensemble.

Debian's ``zookeeper`` package has the jar; it runs on Java (``default-jre-headless``).
Each member gets its own ``zoo.cfg`` and data directory with its ``myid``; the admin
server is off (every member would bind :8080). A member is ready when the ``srvr``
four-letter word shows a ``Mode:`` (standalone, leader or follower), which in an
ensemble needs a quorum: its members are launched together (:meth:`ServerPool.cluster`).
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import TYPE_CHECKING

from fencelock.testing.process import ServerOptions, ServerProcess
from fencelock.testing.tools import LOOPBACK, ToolMissing, free_port

if TYPE_CHECKING:
    from typing_extensions import Unpack

JARS = (Path("/usr/share/java/zookeeper.jar"), Path("/usr/share/java/slf4j-simple.jar"))
MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
TICK_MS = 500  # a session timeout may be as short as 2 ticks: 1 s
MAX_SESSION_MS = 120_000  # and as long as 2 minutes (the default lease TTL is 30 s)


class ZooKeeperServer(ServerProcess):
    """One ZooKeeper member; ``members`` is its ensemble (itself alone: standalone)."""

    kind = "zookeeper"
    program = "java"
    package = "default-jre-headless"

    def __init__(self, workdir: Path, *, myid: int = 1, **options: Unpack[ServerOptions]) -> None:
        super().__init__(workdir, **options)
        self.myid = myid
        self.quorum_port, self.election_port = free_port(), free_port()
        self.members: list[ZooKeeperServer] = [self]

    def config(self) -> str:
        """This member's ``zoo.cfg``."""
        lines = [
            f"tickTime={TICK_MS}",
            f"maxSessionTimeout={MAX_SESSION_MS}",
            "initLimit=10",
            "syncLimit=5",
            f"dataDir={self.workdir / 'data'}",
            f"clientPort={self.port}",
            f"clientPortAddress={LOOPBACK}",
            "admin.enableServer=false",
            "4lw.commands.whitelist=srvr,ruok,mntr,conf",
        ]
        if len(self.members) > 1:
            lines += [
                f"server.{m.myid}={LOOPBACK}:{m.quorum_port}:{m.election_port}"
                for m in self.members
            ]
        return "\n".join(lines) + "\n"

    def prepare(self) -> None:
        """Its data directory with ``myid``, and its ``zoo.cfg``."""
        super().prepare()
        data = self.workdir / "data"
        data.mkdir(exist_ok=True)
        (data / "myid").write_text(f"{self.myid}\n")
        (self.workdir / "zoo.cfg").write_text(self.config())

    def argv(self) -> list[str]:
        missing = [str(jar) for jar in JARS if not jar.exists()]
        if missing:
            raise ToolMissing(
                f"{', '.join(missing)} missing: apt-get install zookeeper "
                "(scripts/install-servers.sh installs every server the tests use)"
            )
        classpath = ":".join(str(jar) for jar in JARS)
        return [
            self.executable(),
            "-Xmx128m",
            "-cp",
            classpath,
            MAIN,
            str(self.workdir / "zoo.cfg"),
        ]

    def mode(self) -> str | None:
        """``standalone``, ``leader`` or ``follower`` by the ``srvr`` word; None if not serving."""
        return _field(self._word(b"srvr"), "Mode:")

    def ready(self) -> bool:
        """It serves (``srvr`` shows its mode: in an ensemble, it has a quorum), and the
        server on its port is this one (``conf`` shows this member's data directory)."""
        data_dir = _field(self._word(b"conf"), "dataDir=")
        return self.mode() is not None and data_dir == str(self.workdir / "data" / "version-2")

    def _word(self, word: bytes) -> str:
        """The reply to a four-letter word; empty if it cannot be had."""
        try:
            with socket.create_connection((LOOPBACK, self.port), timeout=2) as sock:
                sock.sendall(word)
                reply = b""
                while chunk := sock.recv(4096):
                    reply += chunk
        except OSError:
            return ""
        return reply.decode(errors="replace")

    @property
    def url(self) -> str:
        """``zookeeper://`` and every member's client address."""
        return "zookeeper://" + ",".join(m.address for m in self.members)


def _field(reply: str, prefix: str) -> str | None:
    """The value after ``prefix`` on the first line that starts with it."""
    for line in reply.splitlines():
        if line.startswith(prefix):
            return line[len(prefix) :].strip()
    return None
