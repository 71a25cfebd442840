"""Code that runs in child processes of the contract suite (importable by spawn)."""

from __future__ import annotations

import time
from pathlib import Path

import fencelock
from fencelock import clock
from fencelock.testing import set_waiter_timing


def unsafe_increments(url: str, name: str, counter: str, rounds: int, log: str) -> None:
    """Read-modify-write a file counter under the lock; log (start, end, token)."""
    with fencelock.connect(url) as client:
        lock = client.lock(name, ttl=10)
        for _ in range(rounds):
            with lock as lease:
                start = clock.now()
                value = int(Path(counter).read_text())
                time.sleep(0.002)
                Path(counter).write_text(str(value + 1))
                end = clock.now()
            with open(log, "a") as out:
                out.write(f"{start} {end} {lease.token}\n")


def lasting_waiters(liveness: float) -> None:
    """This process's queued waiters stay in line ``liveness`` s after their last ask
    (not 3 s): one that dies without leaving it then holds the line up that long."""
    set_waiter_timing(refresh=liveness / 3, liveness=liveness)


def fair_waiter(url: str, name: str, index: int, log: str, liveness: float | None = None) -> None:
    """Wait in line (fair) for ``name``; log ``index token`` once it is ours."""
    if liveness is not None:
        lasting_waiters(liveness)
    with fencelock.connect(url) as client, client.lock(name, fair=True, timeout=30) as lease:
        with open(log, "a") as out:
            out.write(f"{index} {lease.token}\n")
        time.sleep(0.005)


def hold_and_hang(url: str, name: str, ttl: float, log: str) -> None:
    """Take ``name`` without renewal and log ``held``; once ``LOG.go`` exists, cut the
    lease to ``ttl`` s, log ``expires_at`` (host clock, at the earliest), then hang."""
    client = fencelock.connect(url)
    lease = client.lock(name, ttl=60, renew=False).acquire(timeout=10)
    Path(log).write_text("held")
    go = Path(log + ".go")
    deadline = time.monotonic() + 60
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    started = clock.now()
    lease.extend(ttl)
    Path(log).write_text(str(started + ttl))
    time.sleep(3600)
