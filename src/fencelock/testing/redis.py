"""``redis-server`` as a throwaway server: no persistence, plain or TLS, any extra options.

Passwords, ACL users, replication and cluster mode are ``redis-server`` options passed
as ``extra`` (``"--requirepass", "pw"``; ``"--user", "alice", "on", ">pw", "+@all"``).
It is ready when it answers PING: ``+PONG``, or ``-NOAUTH`` where a password or an
ACL guards it (the server is up; the caller's credentials are its own business). An
open server must also say it is this process (``INFO server``'s ``process_id``): a
port another server took meanwhile is not mistaken for this one.
"""

from __future__ import annotations

import re
import socket
import ssl
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

from fencelock.testing.process import ServerOptions, ServerProcess
from fencelock.testing.tls import TLSFiles
from fencelock.testing.tools import LOOPBACK, require_binary

if TYPE_CHECKING:
    from typing_extensions import Unpack

_READY_REPLIES = (b"+PONG", b"-NOAUTH")
# A node of a Redis Cluster: its config file in its own directory; a master silent for
# 1 s is failed over to a replica. Its bus port is given apart (``--cluster-port``): the
# default, 10,000 above a free port, may be out of range.
CLUSTER_NODE_OPTIONS = (
    "--cluster-enabled", "yes",
    "--cluster-config-file", "nodes.conf",
    "--cluster-node-timeout", "1000",
)  # fmt: skip


class RedisServer(ServerProcess):
    """``redis-server`` on a free port (TLS only, on that port, if ``tls`` is given)."""

    kind = "redis"
    program = "redis-server"
    package = "redis-server"

    def __init__(
        self,
        workdir: Path,
        *extra: str,
        tls: TLSFiles | None = None,
        **options: Unpack[ServerOptions],
    ) -> None:
        super().__init__(workdir, **options)
        self.extra = extra
        self.tls = tls

    def argv(self) -> list[str]:
        """No persistence, loopback only; TLS replaces the plain port when asked."""
        argv = [self.executable(), "--bind", LOOPBACK, "--save", "", "--appendonly", "no"]
        argv += ["--dir", str(self.workdir)]
        if self.tls is None:
            argv += ["--port", str(self.port)]
        else:
            argv += ["--port", "0", "--tls-port", str(self.port)]
            argv += ["--tls-cert-file", str(self.tls.cert), "--tls-key-file", str(self.tls.key)]
            argv += ["--tls-ca-cert-file", str(self.tls.ca), "--tls-auth-clients", "no"]
        return [*argv, *self.extra]

    def ready(self) -> bool:
        """It answered PING (over TLS, verified against the CA, when it has TLS)."""
        try:
            with socket.create_connection((LOOPBACK, self.port), timeout=2) as raw:
                if self.tls is None:
                    return _ping(raw, self.pid)
                context = ssl.create_default_context(cafile=str(self.tls.ca))
                context.check_hostname = False  # any name: readiness is not the test
                with context.wrap_socket(raw) as tls:
                    return _ping(tls, self.pid)
        except (OSError, ssl.SSLError):
            return False

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT/0``, or ``rediss://…?ssl_ca_certs=CA`` with TLS."""
        if self.tls is None:
            return f"redis://{self.address}/0"
        return f"rediss://{self.address}/0?ssl_ca_certs={self.tls.ca}"

    def cli(self, *args: str) -> str:
        """``redis-cli -p PORT ARGS…`` (plain, no credentials); stdout, stripped."""
        done = subprocess.run(  # noqa: S603 (a test server with arguments built here, no shell)
            [require_binary("redis-cli", "redis-tools"), "-p", str(self.port), *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=10,
        )
        return done.stdout.strip()


def create_cluster(nodes: list[RedisServer], replicas: int = 0, timeout: float = 60) -> None:
    """Join fresh cluster-enabled ``nodes`` into one cluster (``redis-cli --cluster
    create``: the first ``len(nodes) // (1 + replicas)`` are the masters) and wait until
    every node says the cluster is up and every replica has synced with its master (a
    replica that never synced cannot take over)."""
    addresses = [node.address for node in nodes]
    done = subprocess.run(  # noqa: S603 (a test server with arguments built here, no shell)
        [require_binary("redis-cli", "redis-tools"), "--cluster", "create", *addresses,
         "--cluster-replicas", str(replicas), "--cluster-yes"],
        capture_output=True, text=True, check=False, timeout=timeout,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"redis-cli --cluster create failed: {done.stdout}{done.stderr}")
    masters = len(nodes) // (1 + replicas)
    deadline = time.monotonic() + timeout
    while True:
        states = [node.cli("CLUSTER", "INFO") for node in nodes]
        roles = [node.cli("INFO", "replication") for node in nodes]
        synced = sum("master_link_status:up" in role for role in roles)  # replicas in sync
        if synced == len(nodes) - masters and all(
            "cluster_state:ok" in s and f"cluster_size:{masters}" in s for s in states
        ):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the Redis Cluster did not come up: {states}")
        time.sleep(0.1)


def _ping(sock: socket.socket, pid: int | None) -> bool:
    """It answers PING, and (unless a password keeps INFO from us) it is process ``pid``."""
    sock.sendall(b"PING\r\n")
    reply = sock.recv(64)
    if not reply.startswith(_READY_REPLIES):
        return False
    if reply.startswith(b"-NOAUTH"):
        return True
    sock.sendall(b"INFO server\r\n")
    info = b""
    while b"process_id:" not in info or not info.endswith(b"\r\n\r\n"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        info += chunk
    found = re.search(rb"process_id:(\d+)", info)
    return found is not None and int(found.group(1)) == pid


class SentinelServer(ServerProcess):
    """``redis-server --sentinel`` on a free port, watching the master at
    ``master_port`` as ``service`` (failover after 1 s of silence)."""

    kind = "sentinel"
    program = "redis-server"
    package = "redis-server"

    def __init__(
        self,
        workdir: Path,
        master_port: int,
        *,
        service: str = "mymaster",
        quorum: int = 2,
        name: str | None = None,
        port: int | None = None,
    ) -> None:
        super().__init__(workdir, name=name, port=port)
        self.master_port, self.service, self.quorum = master_port, service, quorum

    def argv(self) -> list[str]:
        """A fresh config each start (Sentinel rewrites its own as it learns)."""
        config = self.workdir / "sentinel.conf"
        config.write_text(
            f"port {self.port}\nbind {LOOPBACK}\ndir {self.workdir}\n"
            f"sentinel monitor {self.service} {LOOPBACK} {self.master_port} {self.quorum}\n"
            f"sentinel down-after-milliseconds {self.service} 1000\n"
            f"sentinel failover-timeout {self.service} 5000\n"
        )
        return [self.executable(), str(config), "--sentinel"]

    def ready(self) -> bool:
        """It answers PING and knows the master."""
        try:
            with socket.create_connection((LOOPBACK, self.port), timeout=2) as raw:
                raw.sendall(f"SENTINEL get-master-addr-by-name {self.service}\r\n".encode())
                return raw.recv(256).startswith(b"*2")
        except OSError:
            return False

    def master_port_now(self) -> int | None:
        """The port of the master this sentinel names now."""
        with socket.create_connection((LOOPBACK, self.port), timeout=2) as raw:
            raw.sendall(f"SENTINEL get-master-addr-by-name {self.service}\r\n".encode())
            reply = raw.recv(256).split(b"\r\n")
        return int(reply[4]) if len(reply) > 4 and reply[0] == b"*2" else None
