"""The benchmark's settings, constants and peer libraries (which are installed, their versions)."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from harness.cli import RunSettings, add_contended, parser, scenarios
from harness.peers import peer_versions as installed_versions
from harness.peers import version

import fencelock

TTL = 30.0
TTL_MS = int(TTL * 1000)
REDLOCK_ACQUIRE_TIMEOUT = 2.0  # how long one Redlock acquire may wait (scenarios 3-4)
NODE_TIMEOUT = 0.1  # fencelock's per-node Redlock timeout, and the tuned peers' socket timeout
GRACE = 2.0  # a Redlock row still inside a call this long after its end is killed
CLOSE_GRACE = 2.0  # how long a finished Redlock row may take to close its client
PROGRESS_EVERY = 0.25  # Redlock rows report progress this often (survives a kill)
BATCH = 20  # uncontended cycles between two clock reads
MAX_REDLOCK_CALLS = 500_000
NODES = 5
HUNG, KILLED = 3, 4  # which Redlock nodes scenario 4 stops and kills
# the usual compare-and-delete (redis-py's own Lock releases with the same script)
CAD_LUA = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"
)
# distribution name -> module name of each peer library
PEERS = {
    "redis": "redis",
    "python-redis-lock": "redis_lock",
    "pottery": "pottery",
    "redlock-py": "redlock",
    "aioredlock": "aioredlock",
}

Address = tuple[str, int]
SyncCycle = Callable[[], int]  # one acquire+release; returns the fencing token, or -1
AsyncCycle = Callable[[], Awaitable[int]]
AsyncClose = Callable[[], Awaitable[Any]]


@dataclass(frozen=True)
class Settings(RunSettings):
    redlock_rounds: int  # scenario 3: interleaved rounds of redlock_seconds / redlock_rounds
    redlock_seconds: float  # timed seconds per Redlock row (scenario 4: one round)
    scenarios: tuple[int, ...]

    @classmethod
    def from_args(cls, argv: Sequence[str] | None) -> Settings:
        made = parser("fencelock's Redis backends side by side with peer Redis locks.",
                      "short smoke run (~50 s)")  # fmt: skip
        add_contended(made, seconds=5.0)
        made.add_argument(
            "--redlock-seconds", type=float, default=3.0, help="run length of a Redlock row"
        )
        made.add_argument(
            "--only", default="1,2,3,4,5", help="scenarios to run, e.g. --only 3,4 (default all)"
        )
        args = made.parse_args(argv)
        only = scenarios(made, args.only, 5)
        if args.workers < 2 or args.seconds <= 0 or args.hold_ms < 0 or args.redlock_seconds <= 0:
            made.error("need --workers >= 2, --seconds > 0, --hold-ms >= 0, --redlock-seconds > 0")
        hold = args.hold_ms / 1000
        if args.quick:
            return cls(1, 0.4, args.workers, 1.5, hold, 1, 1.0, only)
        return cls(5, 0.6, args.workers, args.seconds, hold, 3, args.redlock_seconds, only)


def peer_versions() -> dict[str, str | None]:
    """Each peer's installed version, or None (after saying why) if it cannot be imported."""
    found = installed_versions(PEERS)
    if (hiredis := version("hiredis")) is not None:
        found["hiredis"] = hiredis  # redis-py parses with it
    return found


def quiet_peer_logs() -> None:
    """Peers log every node error with a traceback (pottery, redlock-py); errors are counted
    in the tables instead, so nothing is printed (a handler on the root logger stops
    Python's last-resort printing to stderr)."""
    logging.getLogger().addHandler(logging.NullHandler())


def fair_supported() -> bool:
    """True if this fencelock's ``Client.lock`` takes a ``fair`` keyword."""
    return "fair" in inspect.signature(fencelock.Client.lock).parameters


def redis_url(address: Address) -> str:
    return f"redis://{address[0]}:{address[1]}/0"


def redlock_url(nodes: Sequence[Address]) -> str:
    hosts = ",".join(f"{host}:{port}" for host, port in nodes)
    return f"redlock://{hosts}?timeout={NODE_TIMEOUT:g}"


def redis_py_default_sleep() -> float:
    """redis-py Lock's polling interval, read from its signature rather than assumed."""
    from redis.lock import Lock

    return float(inspect.signature(Lock.__init__).parameters["sleep"].default)
