"""``etcd`` (v3) as a throwaway server: one member, or a member of a loopback cluster.

Each member has a client port and a peer port, and its data in its own directory. It
is ready when ``/health`` says so, which needs the cluster's leader: the members of a
cluster are launched together and waited for together (:meth:`ServerPool.cluster`).
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fencelock.testing.process import ServerOptions, ServerProcess
from fencelock.testing.tls import TLSFiles
from fencelock.testing.tools import LOOPBACK, free_port

if TYPE_CHECKING:
    from typing_extensions import Unpack


class EtcdServer(ServerProcess):
    """One etcd member; ``members`` is its cluster (itself alone unless set before start).

    With ``tls``, clients talk to it over TLS only (peers stay on plain loopback HTTP).
    """

    kind = "etcd"
    program = "etcd"
    package = "etcd-server"

    def __init__(
        self, workdir: Path, *, tls: TLSFiles | None = None, **options: Unpack[ServerOptions]
    ) -> None:
        super().__init__(workdir, **options)
        self.tls = tls
        self.peer_port = free_port()
        self.members: list[EtcdServer] = [self]

    @property
    def peer_url(self) -> str:
        """Where the other members reach this one."""
        return f"http://{LOOPBACK}:{self.peer_port}"

    def argv(self) -> list[str]:
        """Loopback only; the cluster as ``members`` says, its token the first member's name."""
        client = f"{self._scheme}://{self.address}"
        tls = self.tls
        certificates = (
            () if tls is None else ("--cert-file", str(tls.cert), "--key-file", str(tls.key))
        )
        cluster = ",".join(f"{m.name}={m.peer_url}" for m in self.members)
        return [
            self.executable(),
            *("--name", self.name, "--data-dir", str(self.workdir / "data")),
            *("--listen-client-urls", client, "--advertise-client-urls", client),
            *("--listen-peer-urls", self.peer_url),
            *("--initial-advertise-peer-urls", self.peer_url),
            *("--initial-cluster", cluster, "--initial-cluster-state", "new"),
            *("--initial-cluster-token", self.members[0].name),
            *certificates,
        ]

    @property
    def _scheme(self) -> str:
        return "http" if self.tls is None else "https"

    def _open(self, request: str | urllib.request.Request) -> Any:
        context = None if self.tls is None else ssl.create_default_context(cafile=self.tls.ca)
        return urllib.request.urlopen(request, timeout=2, context=context)  # noqa: S310 (an http(s) URL built here)

    def ready(self) -> bool:
        """Its ``/health`` answers true (the cluster has a leader and this member serves),
        and the member answering on its port is this one (by name)."""
        try:
            with self._open(f"{self._scheme}://{self.address}/health") as reply:
                healthy = json.load(reply).get("health") == "true"
            return healthy and self._answering_member() == self.name
        except (OSError, ValueError, KeyError, urllib.error.URLError):
            return False

    def _answering_member(self) -> str | None:
        request = urllib.request.Request(  # noqa: S310 (an http(s) URL built here)
            f"{self._scheme}://{self.address}/v3/cluster/member/list", data=b"{}", method="POST"
        )
        with self._open(request) as reply:
            listing = json.load(reply)
        me = listing["header"]["member_id"]
        return next((m.get("name") for m in listing["members"] if m["ID"] == me), None)

    @property
    def url(self) -> str:
        """``etcd://`` and every member's client address."""
        scheme = "etcd" if self.tls is None else "etcds"
        return f"{scheme}://" + ",".join(m.address for m in self.members)
