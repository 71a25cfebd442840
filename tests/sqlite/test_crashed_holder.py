"""On ``sqlite:///`` a crashed holder's lock is taken at once; a paused one keeps it.

Every holder of the embedded backend runs on this host: a waiter that sees the holder's
process gone (same boot and PID namespace; the PID not running, a zombie, or another
process) takes the lease with the next token instead of waiting out its TTL (30 s by
default; filelock frees it at once). A stopped holder still runs; a holder in another
PID namespace is never judged by a PID from this one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import fencelock
from tests.polling import wait_until

TTL = 60.0  # a waiter that waits for the TTL fails these tests
DEADLINE = 30.0

HOLDER = """
import sys, time, fencelock
client = fencelock.connect(sys.argv[1])
lease = client.lock(sys.argv[2], ttl=float(sys.argv[3])).acquire()
print(lease.token, flush=True)
time.sleep(3600)
"""


@contextlib.contextmanager
def holder(url: str, name: str, *prefix: str) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """A process holding ``name`` (TTL 60 s); its Popen and its lease's token."""
    proc = subprocess.Popen(
        [*prefix, sys.executable, "-c", HOLDER, url, name, str(TTL)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip().isdigit(), proc.communicate(timeout=DEADLINE)[1]
        yield proc, int(line)
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGCONT)
            proc.kill()
        proc.communicate(timeout=DEADLINE)


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'locks.db'}"


def test_a_killed_holders_lock_goes_to_a_waiter_at_once(url: str) -> None:
    with fencelock.connect(url) as client, holder(url, "jobs/crash") as (proc, token):
        got: list[tuple[float, int]] = []

        def wait() -> None:
            lease = client.lock("jobs/crash", ttl=5).acquire(timeout=DEADLINE)
            got.append((time.monotonic(), lease.token))
            lease.release()

        waiter = threading.Thread(target=wait)
        waiter.start()
        time.sleep(0.3)  # the waiter is waiting
        assert not got
        killed = time.monotonic()
        proc.kill()
        waiter.join(DEADLINE)
        assert got, "the waiter did not get the lock"
        took, new_token = got[0][0] - killed, got[0][1]
        assert new_token > token
        assert took < TTL / 4, f"waited {took:.2f}s: the TTL, not the crash"


def test_a_killed_holders_lock_is_free_for_a_newcomer(url: str) -> None:
    with fencelock.connect(url) as client, holder(url, "jobs/gone") as (proc, token):
        proc.kill()
        proc.wait(DEADLINE)
        lease = client.lock("jobs/gone").acquire(timeout=0)
        assert lease.token == token + 1
        lease.release()


def test_a_zombie_holder_has_crashed(url: str) -> None:
    """Killed but not yet reaped by its parent: it runs no code, its lease is free."""
    with fencelock.connect(url) as client, holder(url, "jobs/zombie") as (proc, _):
        os.kill(proc.pid, signal.SIGKILL)
        wait_until(
            lambda: Path(f"/proc/{proc.pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z",
            what=f"process {proc.pid} a zombie",
            timeout=DEADLINE,
            interval=0.01,
        )
        assert client.lock("jobs/zombie").try_acquire() is not None


def test_a_paused_holder_keeps_its_lock(url: str) -> None:
    with fencelock.connect(url) as client, holder(url, "jobs/paused") as (proc, _):
        proc.send_signal(signal.SIGSTOP)
        with pytest.raises(fencelock.LockTimeout):
            client.lock("jobs/paused").acquire(timeout=1.0)
        assert client.lock("jobs/paused").try_acquire() is None


def _unshare() -> list[str]:
    """A command prefix that runs in a new PID namespace, or skip."""
    tool = shutil.which("unshare")
    if tool is None:
        pytest.skip("no unshare(1)")
    probe = subprocess.run(
        [tool, "--pid", "--fork", "--mount-proc", "true"], capture_output=True, check=False
    )
    if probe.returncode != 0:
        pytest.skip(f"cannot make a PID namespace here: {probe.stderr.decode().strip()}")
    return [tool, "--pid", "--fork", "--mount-proc", "--kill-child"]


def test_a_holder_in_another_pid_namespace_is_never_judged_by_its_pid(url: str) -> None:
    """Inside its namespace the holder is PID 2 or so: here that PID is another process
    (or none), and taking its lock for that would give the lock to two."""
    prefix = _unshare()
    with (
        fencelock.connect(url) as client,
        holder(url, "jobs/ns", *prefix),
        pytest.raises(fencelock.LockTimeout),
    ):
        client.lock("jobs/ns").acquire(timeout=1.0)


@pytest.mark.parametrize(
    "leave",
    [
        "client.lock(name, ttl=60, renew=False).acquire()",
        "client.lock(name, ttl=5).acquire().expire_in(60)",
    ],
    ids=["renew=False", "expire_in"],
)
def test_a_lease_meant_to_outlive_its_process_is_not_taken_when_it_exits(
    url: str, leave: str
) -> None:
    """A lease not renewed, or left to its TTL (run-once's at_least), is meant to last
    its TTL after its process exits: that exit is no crash."""
    script = "\n".join(
        [
            "import sys, fencelock",
            "client = fencelock.connect(sys.argv[1])",
            "name = 'jobs/kept'",
            leave,
        ]
    )
    done = subprocess.run(
        [sys.executable, "-c", script, url],
        check=False,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert done.returncode == 0, done.stderr
    with fencelock.connect(url) as client:
        assert client.lock("jobs/kept").try_acquire() is None
