"""``fencelock run`` stops CMD inside its lease: never two CMDs at once.

Two runs of one lock, each CMD ignoring SIGTERM and logging its start and a heartbeat
every 10 ms. The first holder's server becomes unreachable (Redis and etcd paused
past the TTL) or ends its connection (MariaDB ``KILL``); the second run then takes the
lock. The first CMD's last heartbeat must come before the second CMD's start: with a
grace that began at the loss (10 s by default), the two ran side by side.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fencelock.backends.mysql.statements import lock_name
from fencelock.testing import ServerPool
from fencelock.testing.process import ServerProcess
from tests.cli.conftest import FENCELOCK
from tests.polling import wait_until

DEADLINE = 60.0
# MariaDB hands the lock to the waiter as it kills the holder's connection: the holder
# hears of it milliseconds later (2-3 ms measured), more on a loaded machine.
REVOKED_WINDOW = 0.1
NAME = "jobs/inside"
STUBBORN = """
import signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
with open(sys.argv[1], "a", buffering=1) as log:
    log.write(f"start {time.time()!r}\\n")
    while True:
        log.write(f"beat {time.time()!r}\\n")
        time.sleep(0.01)
"""


def _times(log: Path, word: str) -> list[float]:
    if not log.exists():
        return []
    return [
        float(line.split()[1])
        for line in log.read_text().splitlines()
        if line.startswith(word + " ") and len(line.split()) == 2
    ]


@contextlib.contextmanager
def _run(url: str, ttl: float, log: Path, *more: str) -> Iterator[subprocess.Popen[str]]:
    cmd = [sys.executable, "-c", STUBBORN, str(log)]
    args = [FENCELOCK, "run", "--url", url, "--ttl", str(ttl), *more, NAME, "--", *cmd]
    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        for pid in _pids_writing(log):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.communicate(timeout=DEADLINE)


def _pids_writing(log: Path) -> list[int]:
    """CMD runs in a process group of its own: found by its log's path in its argv."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if str(log).encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
    return found


def _assert_one_at_a_time(first: Path, second: Path, window: float = 0.0) -> None:
    """The first CMD's last heartbeat came before the second CMD started (less
    ``window``: where the server hands the lock over as it revokes it, the holder
    hears of it a few milliseconds later; docs/backends.md)."""
    beats, starts = _times(first, "beat"), _times(second, "start")
    assert beats
    assert starts
    overlap = beats[-1] - starts[0]
    assert overlap < window, f"the first CMD ran {overlap:.3f}s beside the second"


def _paused_server_case(url: str, server: ServerProcess, ttl: float, tmp_path: Path) -> None:
    first, second = tmp_path / "first.log", tmp_path / "second.log"
    with _run(url, ttl, first) as holder:
        wait_until(lambda: _times(first, "start"), what="the first CMD started", timeout=DEADLINE)
        server.pause()
        try:
            time.sleep(ttl + 0.5)  # the holder cannot renew: its lease's safe time ends
        finally:
            server.resume()
        with _run(url, ttl, second, "--wait", str(DEADLINE)):
            wait_until(
                lambda: _times(second, "start"), what="the second CMD started", timeout=DEADLINE
            )
            wait_until(
                lambda: holder.poll() is not None, what="the first run ended", timeout=DEADLINE
            )
            time.sleep(0.2)
    assert holder.returncode == 76
    _assert_one_at_a_time(first, second)


def test_a_paused_redis_stops_the_command_before_anyone_else_can_start(tmp_path: Path) -> None:
    with ServerPool.under(tmp_path) as pool:
        redis = pool.redis(name="inside-redis")
        _paused_server_case(redis.url, redis, 1.5, tmp_path)


def test_a_paused_etcd_stops_the_command_before_anyone_else_can_start(tmp_path: Path) -> None:
    with ServerPool.under(tmp_path) as pool:
        (etcd,) = pool.etcd(name="inside-etcd")
        _paused_server_case(f"etcd://{etcd.address}", etcd, 3.0, tmp_path)


@pytest.mark.timeout(180)
def test_a_killed_mysql_connection_stops_the_command_at_once(tmp_path: Path) -> None:
    first, second = tmp_path / "first.log", tmp_path / "second.log"
    with ServerPool.under(tmp_path) as pool:
        mariadb = pool.mariadb(name="inside-mariadb")
        with _run(mariadb.url, 6.0, first) as holder:
            wait_until(
                lambda: _times(first, "start"), what="the first CMD started", timeout=DEADLINE
            )
            with _run(mariadb.url, 6.0, second, "--wait", str(DEADLINE)):
                time.sleep(0.5)  # the second run is waiting inside GET_LOCK
                (row,) = mariadb.sql("SELECT IS_USED_LOCK(%s)", (lock_name("fencelock:", NAME),))
                mariadb.sql(f"KILL CONNECTION {int(row[0])}")
                wait_until(
                    lambda: _times(second, "start"), what="the second CMD started", timeout=DEADLINE
                )
                wait_until(
                    lambda: holder.poll() is not None, what="the first run ended", timeout=DEADLINE
                )
                time.sleep(0.2)
    assert holder.returncode == 76
    _assert_one_at_a_time(first, second, window=REVOKED_WINDOW)
