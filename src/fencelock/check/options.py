"""The options of a check run, and what makes a run impossible (said in one sentence)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fencelock.check.nemesis import NEMESES, NETWORK_NEMESES, SERVER_NEMESES
from fencelock.check.servers import DATABASES, NODES
from fencelock.check.sessions import NO_SESSION_NEMESIS
from fencelock.check.workloads import FENCE_WITH, WORKLOADS
from fencelock.engine.urls import parse_url
from fencelock.errors import ConfigError

SERVER_KINDS = tuple(NODES)  # what --servers starts


@dataclass(frozen=True)
class CheckOptions:
    """One check run. ``url`` or ``servers`` (neither: a fresh SQLite file in the run dir)."""

    url: str | None = None
    servers: str | None = None  # one of NODES (redis, redlock, etcd, …): started here
    workload: str = "register"
    clients: int = 8
    duration: float = 10.0
    ttl: float = 1.0
    work: float = 0.01  # mean seconds of "work" between the lease check and the write
    nemeses: tuple[str, ...] = ("pause", "kill")
    fencing: bool = True
    seed: int = 0
    report: Path | None = None
    fence_reads: bool = True  # False: fence the write only (shows why that is not enough)
    fence_with: str = "guard"  # "sqlalchemy": the resource's fence checked by the ORM integration


def validate(options: CheckOptions) -> None:
    """Raise ConfigError for a run that cannot be made (one clear sentence)."""
    _validate_values(options)
    _validate_backend(options)


def _validate_values(options: CheckOptions) -> None:
    if options.workload not in WORKLOADS:
        raise ConfigError(
            f"unknown workload {options.workload!r} (choose from {', '.join(WORKLOADS)})"
        )
    for name in options.nemeses:
        if name not in NEMESES:
            raise ConfigError(f"unknown nemesis {name!r} (choose from {', '.join(NEMESES)})")
    if options.clients < 2:
        raise ConfigError("--clients must be at least 2: someone has to take over the lock")
    if not 0.05 <= options.ttl <= 60:
        raise ConfigError("--ttl must be between 0.05 and 60 seconds")
    if options.duration <= 0:
        raise ConfigError("--duration must be positive")
    if options.work < 0:
        raise ConfigError("--work must be 0 or more seconds")
    if not options.fencing and not options.fence_reads:
        raise ConfigError("--fence-writes-only and --no-fencing contradict each other")
    _validate_fence_with(options)


def _validate_fence_with(options: CheckOptions) -> None:
    if options.fence_with not in FENCE_WITH:
        raise ConfigError(
            f"--fence-with must be one of {', '.join(FENCE_WITH)}, not {options.fence_with!r}"
        )
    if options.fence_with == "guard":
        return
    if not options.fencing:
        raise ConfigError("--fence-with sqlalchemy and --no-fencing contradict each other")
    try:
        import sqlalchemy  # noqa: F401
    except ImportError:
        raise ConfigError(
            "--fence-with sqlalchemy needs SQLAlchemy: pip install 'fencelock[sqlalchemy]'"
        ) from None


def _validate_backend(options: CheckOptions) -> None:
    """The lock servers (or URL) against the nemeses that need them."""
    if options.servers is not None and options.url is not None:
        raise ConfigError("give --url or --servers, not both")
    if options.servers not in (None, *SERVER_KINDS):
        raise ConfigError(
            f"--servers must be one of {', '.join(SERVER_KINDS)}, not {options.servers!r}"
        )
    if options.servers in DATABASES and "clock" in options.nemeses:
        raise ConfigError(
            f"the clock nemesis cannot step the clock of --servers {options.servers} yet: "
            "the database server would have to run under libfaketime (docs/safety.md)"
        )
    if options.servers in ("etcd", "zookeeper") and "clock" in options.nemeses:
        raise ConfigError(
            f"the clock nemesis cannot step {options.servers}'s clock: it expires leases and "
            "sessions by a monotonic clock, which a wall-clock step does not move "
            "(docs/safety.md)"
        )
    if "session" in options.nemeses and options.servers in NO_SESSION_NEMESIS:
        raise ConfigError(f"the session nemesis: {NO_SESSION_NEMESIS[options.servers]}")
    scheme = _scheme(options)
    if scheme == "memory":
        raise ConfigError(
            "memory:// keeps its locks inside one process, and fencelock check runs every "
            "client in its own process: use sqlite:///path, redis:// or redlock://"
        )
    wants_servers = [n for n in options.nemeses if n in SERVER_NEMESES]
    if wants_servers and options.servers is None:
        raise ConfigError(
            f"the {wants_servers[0]} nemesis needs servers the harness started itself: "
            f"use --servers {'|'.join(SERVER_KINDS)} instead of --url"
        )
    if any(n in NETWORK_NEMESES for n in options.nemeses) and scheme == "sqlite":
        raise ConfigError(
            "the partition nemesis cuts clients off a lock server; sqlite:// has none "
            f"(use --servers {'|'.join(SERVER_KINDS)}, or a server's --url)"
        )


def _scheme(options: CheckOptions) -> str:
    if options.servers is not None:
        return options.servers
    if options.url is None:
        return "sqlite"
    return parse_url(options.url).scheme
