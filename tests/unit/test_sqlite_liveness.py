"""The embedded backend's rule: a holder is dead only on positive proof, and an expiry is
read only on the clock it was written on (fencelock.backends.sqlite.liveness)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from fencelock.backends.sqlite import liveness
from fencelock.backends.sqlite.liveness import GONE, Here, Recorded
from tests.polling import wait_until

BOOTS = st.sampled_from(["boot-a", "boot-b"])
PIDNS = st.sampled_from(["pid:[1]", "pid:[2]"])
TIMENS = st.sampled_from(["time:[1]", "time:[2]"])
TICKS = st.integers(min_value=0, max_value=10**9)
TIMES = st.floats(min_value=0.0, max_value=1e6, allow_nan=False)
TTLS = st.floats(min_value=0.01, max_value=1e4, allow_nan=False)

heres = st.builds(
    Here,
    boot=st.none() | BOOTS,
    pidns=st.none() | PIDNS,
    timens=st.none() | TIMENS,
    proc_matches=st.booleans(),
    pid=st.integers(1, 1000),
    start_ticks=st.none() | TICKS,
)
rows = st.builds(
    Recorded,
    owner=st.none() | st.just("owner"),
    token=st.integers(1, 100),
    expires_at=TIMES,
    boot=BOOTS | st.just("unknown-boot"),
    ttl=st.none() | TTLS,
    timens=st.none() | TIMENS,
    pidns=st.none() | PIDNS,
    pid=st.none() | st.integers(1, 1000),
    start_ticks=st.none() | TICKS,
    seen=st.none() | TIMES,
)
processes = st.none() | st.just(GONE) | TICKS


@given(rows, heres, processes)
def test_a_death_is_proven_only_in_this_boot_and_namespaces_through_our_own_proc(
    row: Recorded, here: Here, process: liveness.Process
) -> None:
    if liveness.dead(row, here, process):
        assert row.owner is not None
        assert here.proc_matches
        assert here.boot is not None
        assert row.boot == here.boot
        assert here.pidns is not None
        assert row.pidns == here.pidns
        assert here.timens is not None
        assert row.timens == here.timens
        assert process == GONE or (process is not None and process != row.start_ticks)


@given(rows, heres, TICKS)
def test_a_holder_running_with_its_own_start_is_never_dead(
    row: Recorded, here: Here, ticks: int
) -> None:
    row = Recorded(**{**row.__dict__, "start_ticks": ticks})
    assert not liveness.dead(row, here, ticks)
    assert not liveness.dead(row, here, None)  # cannot be told


@given(BOOTS, PIDNS, TIMENS, st.integers(1, 1000), TICKS, TTLS)
def test_with_every_fact_shared_a_gone_pid_or_another_start_is_proof(
    boot: str, pidns: str, timens: str, pid: int, ticks: int, ttl: float
) -> None:
    row = Recorded("owner", 1, 0.0, boot, ttl, timens, pidns, pid, ticks, None)
    here = Here(boot, pidns, timens, True, 1, None)
    assert liveness.dead(row, here, GONE)
    assert liveness.dead(row, here, ticks + 1)
    assert not liveness.dead(row, Here(boot, pidns, timens, False, 1, None), GONE)


@given(rows, heres, TIMES)
def test_a_lease_on_another_clock_is_free_only_once_seen_unchanged_for_its_ttl(
    row: Recorded, here: Here, now: float
) -> None:
    assume(row.owner is not None and not liveness.shares_clock(row, here))
    left = liveness.remaining(row, here, now)
    ttl = liveness.LEGACY_TTL if row.ttl is None else row.ttl
    if left is None:
        assert row.seen is not None
        assert now >= row.seen + ttl
    else:
        assert 0 < left <= ttl


@given(rows, heres, TIMES, TIMES)
def test_a_foreign_expiry_never_frees_a_lease(
    row: Recorded, here: Here, now: float, expires_at: float
) -> None:
    """Whatever its expiry says on a clock we cannot read, it is the same lease here."""
    assume(not liveness.shares_clock(row, here))
    moved = Recorded(**{**row.__dict__, "expires_at": expires_at})
    assert liveness.remaining(row, here, now) == liveness.remaining(moved, here, now)


@given(rows, heres)
def test_a_clock_is_shared_only_in_a_known_boot_and_time_namespace(
    row: Recorded, here: Here
) -> None:
    if liveness.shares_clock(row, here):
        assert here.boot is not None
        assert row.boot == here.boot
        if row.ttl is not None:  # an older fencelock's row records no time namespace
            assert here.timens is not None
            assert row.timens == here.timens


# -- the host as /proc shows it -----------------------------------------------------

linux = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


@linux
def test_this_process_knows_its_boot_namespaces_and_start() -> None:
    here = Here.of(liveness.ProcHost())
    assert here.boot
    assert here.pidns
    assert here.timens
    assert here.clock
    assert here.proc_matches
    assert here.pid == os.getpid()
    fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    assert here.start_ticks == int(fields[19])


@linux
def test_a_reaped_child_is_gone_and_a_zombie_too() -> None:
    host = liveness.ProcHost()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = host.process(child.pid)
        assert isinstance(started, int)
        os.kill(child.pid, signal.SIGKILL)
        wait_until(  # a zombie until reaped
            lambda: host.process(child.pid) == GONE, what=f"process {child.pid} gone", interval=0.01
        )
        assert Path(f"/proc/{child.pid}").exists()
    finally:
        child.kill()
        child.wait()
    assert host.process(child.pid) in (GONE, None) or host.process(child.pid) != started
    assert host.process(0) is None
    assert host.process(-1) is None
