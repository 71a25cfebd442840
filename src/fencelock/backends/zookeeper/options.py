"""What a ``zookeeper://`` URL says: the ensemble, the base node, credentials, timeouts."""

from __future__ import annotations

from dataclasses import dataclass, field

from fencelock.engine.urls import ParsedURL, number_option, reject_unknown_options
from fencelock.errors import ConfigError

DEFAULT_PORT = 2181
DEFAULT_BASE = "/fencelock"
KNOWN = {"connect_timeout", "timeout"}


@dataclass(frozen=True)
class ZooKeeperOptions:
    hosts: str  # kazoo's form: "h1:p1,h2:p2"
    base: str  # the node under which every lock's queue lives
    connect_timeout: float
    timeout: float  # one request, once connected
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    @property
    def auth_data(self) -> list[tuple[str, str]]:
        """Digest credentials, sent on every (re)connection."""
        if self.username is None:
            return []
        return [("digest", f"{self.username}:{self.password}")]


def zookeeper_options(parsed: ParsedURL) -> ZooKeeperOptions:
    """Read and check the URL; raises :class:`ConfigError` naming what is wrong."""
    reject_unknown_options(parsed, KNOWN)
    if not parsed.hosts:
        raise ConfigError(
            f"{parsed.redacted!r} names no ZooKeeper server (zookeeper://host:port,.../base)"
        )
    if bool(parsed.username) != bool(parsed.password):
        raise ConfigError(f"{parsed.redacted!r}: give both a user and a password, or neither")
    base = "/" + parsed.path.strip("/") if parsed.path.strip("/") else DEFAULT_BASE
    if any(part in ("", ".", "..", "zookeeper") for part in base.split("/")[1:2]) or any(
        part in ("", ".", "..") for part in base.split("/")[1:]
    ):
        raise ConfigError(
            f"{parsed.redacted!r}: the base node {base!r} is not a usable ZooKeeper path "
            "(no empty, '.' or '..' parts, and not under /zookeeper)"
        )
    hosts = ",".join(
        f"{f'[{host}]' if ':' in host else host}:{port or DEFAULT_PORT}"
        for host, port in parsed.hosts
    )
    return ZooKeeperOptions(
        hosts,
        base,
        number_option(parsed, "connect_timeout", 5.0),
        number_option(parsed, "timeout", 10.0),
        parsed.username,
        parsed.password,
    )
