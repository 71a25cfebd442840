"""A live holder keeps its ``sqlite:///`` lock whatever the waiter's view of the host.

Real processes, as the hostile tester ran them (root, util-linux): the waiter sees
another boot id (a bind mount over ``boot_id``: a second host sharing the file), a
``/proc/stat`` whose btime is 1 s off (a wall-clock step), another time namespace
(``unshare --time --boottime 1000``), or the host's /proc from inside the holder's PID
namespace. In none may it take the lease while the holder runs; once the holder is
killed it gets the lease: at once where the death is proven (the btime case: same boot
and namespaces), else after the lease's TTL (seen unchanged for that long by the waiter
where its clock is not the holder's).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

TTL = 3.0
WATCH = 3.5  # the waiter tries this long while the holder lives: past a whole TTL
DEADLINE = 30.0

HOLDER = """
import sys, time, fencelock
client = fencelock.connect(sys.argv[1])
lease = client.lock(sys.argv[2], ttl=float(sys.argv[3])).acquire()
print(lease.token, flush=True)
time.sleep(3600)
"""

WAITER = """
import sys, time, fencelock
url, name, ttl, watch = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
with fencelock.connect(url) as client:
    lock = client.lock(name, ttl=ttl)
    end = time.monotonic() + watch
    while time.monotonic() < end:
        lease = lock.try_acquire()
        if lease is not None:
            print("stolen", lease.token, flush=True)
            sys.exit(0)
        time.sleep(0.05)
    print("waited", flush=True)
    sys.stdin.readline()  # the holder has been killed
    started = time.monotonic()
    lease = lock.acquire(timeout=60)
    print("got", lease.token, time.monotonic() - started, flush=True)
"""

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux namespaces"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces and mounts"),
]


def _usable(prefix: list[str]) -> list[str]:
    """``prefix`` if it runs a command here, else skip."""
    if shutil.which(prefix[0]) is None:
        pytest.skip(f"no {prefix[0]}(1)")
    probe = subprocess.run([*prefix, "true"], capture_output=True, check=False, timeout=DEADLINE)
    if probe.returncode != 0:
        pytest.skip(f"{' '.join(prefix)}: {probe.stderr.decode().strip()}")
    return prefix


def _bind_over(fake: Path, target: str) -> list[str]:
    """A prefix that runs a command in a mount namespace where ``fake`` hides ``target``."""
    script = f'mount --bind {fake} {target} && exec "$@"'
    return _usable(["unshare", "--mount", "sh", "-c", script, "sh"])


def _children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


@contextlib.contextmanager
def _holder(url: str, name: str, prefix: list[str]) -> Iterator[tuple[int, int]]:
    """A process holding ``name`` (TTL 3 s, renewed): its PID on this host, its token."""
    proc = subprocess.Popen(
        [*prefix, sys.executable, "-c", HOLDER, url, name, str(TTL)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip().isdigit(), proc.communicate(timeout=DEADLINE)[1]
        pid = proc.pid
        while Path(f"/proc/{pid}/comm").read_text().strip() != Path(sys.executable).name[:15]:
            (pid,) = _children(pid)  # through unshare and sh, to the Python holding it
        yield pid, int(line)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=DEADLINE)


def _waiter(url: str, name: str, prefix: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*prefix, sys.executable, "-c", WAITER, url, name, str(TTL), str(WATCH)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _run(url: str, holder: list[str], waiter: Callable[[int], list[str]]) -> float:
    """The holder runs while the waiter tries; the waiter's wait once it is killed."""
    name = f"views/{uuid.uuid4().hex[:8]}"
    with _holder(url, name, holder) as (pid, token):
        proc = _waiter(url, name, waiter(pid))
        try:
            assert proc.stdout is not None
            assert proc.stdin is not None
            assert proc.stderr is not None
            seen = proc.stdout.readline().split()
            assert seen == ["waited"], (seen, proc.stderr.read() if seen == [] else "")
            os.kill(pid, signal.SIGKILL)
            proc.stdin.write("\n")
            proc.stdin.flush()
            got = proc.stdout.readline().split()
            assert got[:1] == ["got"], proc.communicate(timeout=DEADLINE)
            assert int(got[1]) > token
            return float(got[2])
        finally:
            proc.kill()
            proc.communicate(timeout=DEADLINE)


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'locks.db'}"


def test_a_waiter_with_another_boot_id_waits_out_an_observed_ttl(url: str, tmp_path: Path) -> None:
    """A second host (or VM) sharing the file: its boot id differs, its clock is its own."""
    fake = tmp_path / "boot_id"
    fake.write_text(f"{uuid.uuid4()}\n")
    prefix = _bind_over(fake, "/proc/sys/kernel/random/boot_id")
    waited = _run(url, [], lambda _: prefix)
    assert waited < TTL + 1.5


def test_a_waiter_whose_btime_moved_still_proves_a_crash_at_once(url: str, tmp_path: Path) -> None:
    """btime is the wall clock minus the uptime: a clock step moves it, no process's start."""
    lines = Path("/proc/stat").read_text().splitlines()
    moved = [f"btime {int(ln.split()[1]) + 1}" if ln.startswith("btime ") else ln for ln in lines]
    fake = tmp_path / "stat"
    fake.write_text("\n".join(moved) + "\n")
    prefix = _bind_over(fake, "/proc/stat")
    waited = _run(url, [], lambda _: prefix)
    assert waited < TTL / 2, f"waited {waited:.2f}s: the TTL, not the crash"


def test_a_waiter_in_another_time_namespace_waits_out_an_observed_ttl(url: str) -> None:
    """Its CLOCK_BOOTTIME is 1000 s ahead: the holder's expiry is not on its clock."""
    prefix = _usable(["unshare", "--time", "--fork", "--boottime", "1000"])
    waited = _run(url, [], lambda _: prefix)
    assert waited < TTL + 1.5


def test_a_waiter_reading_the_hosts_proc_in_the_holders_pid_namespace_waits(url: str) -> None:
    """Entered into the holder's PID namespace but not its mount namespace: /proc/1 here
    is the host's init, not the holder; no PID read there proves anything."""
    holder = _usable(["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"])
    holder = [*holder, "sh", "-c", '"$@" & wait; exec sleep 600', "sh"]  # init outlives the holder
    _usable(["nsenter", "--target", str(os.getpid()), "--pid"])
    waited = _run(url, holder, lambda pid: ["nsenter", "--target", str(pid), "--pid"])
    assert waited < TTL + 1.5
