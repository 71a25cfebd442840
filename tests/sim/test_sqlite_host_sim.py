"""The simulator's sqlite family: the real embedded backend on one real file, each
instance reading a simulated host (:mod:`fencelock.sim.sqlite_host`), and the guess of
a dead holder that 599fe11 removed, put back (``--bug sqlite-dead-holder-guess``) and
found: a live holder's lease handed to a waiter on another boot, after a wall-clock
step, in another time namespace, or reading another PID namespace's /proc.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from fencelock.holder import holder_of
from fencelock.sim.__main__ import main
from fencelock.sim.bugs import KNOWN
from fencelock.sim.sqlite_guess import SQLITE_DEAD_HOLDER_GUESS
from fencelock.sim.sqlite_host import SqlitePlan, SqliteWorld, run

TWO = "two clients hold the lease at once"
# The two believers as the violation names them: machine, boot, PID and time namespace.
BELIEVER = re.compile(r"\((host\d) boot (\w+), (pid:\[\d+\]) PID \d+, (time:\[\d+\])([^;]*);")


def test_the_switch_is_registered_beside_the_librarys_own() -> None:
    assert SQLITE_DEAD_HOLDER_GUESS in KNOWN
    with pytest.raises(Exception, match="no such historical bug"):
        SqlitePlan(seed=0, bugs=("sqlite-dead-holder-guess-typo",))


def test_a_run_is_decided_by_its_seed() -> None:
    first, again = run(SqlitePlan(seed=3, duration=10.0)), run(SqlitePlan(seed=3, duration=10.0))
    assert first.ok
    assert again.ok
    assert first.digest == again.digest
    assert first.steps == again.steps


@pytest.mark.parametrize(
    ("seed", "case"),
    [
        (0, "another boot"),  # a second host sharing the file: its row taken as free
        (2, "a btime step"),  # one host and namespace: the start in wall seconds moved
        (8, "the host's /proc"),  # the taker reads PIDs of another PID namespace
        (10, "another time namespace"),  # the taker's clock runs ahead of the expiry
    ],
)
def test_the_guess_is_found_and_the_fix_holds(seed: int, case: str) -> None:
    broken = run(SqlitePlan(seed=seed, bugs=(SQLITE_DEAD_HOLDER_GUESS,)))
    assert not broken.ok
    violation = broken.violation or ""
    assert TWO in violation, violation
    (_, boot_a, pidns_a, timens_a, proc_a), (_, boot_b, pidns_b, timens_b, proc_b) = (
        BELIEVER.findall(violation)
    )
    if case == "another boot":
        assert boot_a != boot_b
    elif case == "another time namespace":
        assert boot_a == boot_b
        assert timens_a != timens_b
    elif case == "the host's /proc":
        assert (boot_a, pidns_a, timens_a) == (boot_b, pidns_b, timens_b)
        assert "the host's /proc" in proc_a + proc_b
    else:
        assert (boot_a, pidns_a, timens_a, proc_a, proc_b) == (boot_b, pidns_b, timens_b, "", "")
        assert any("wall clock steps" in line for line in broken.trace)
    fixed = run(SqlitePlan(seed=seed))
    assert fixed.ok, f"{fixed.violation}\n" + "\n".join(fixed.trace)


def test_a_sweep_of_seeds_keeps_every_invariant() -> None:
    """Every way a dead holder's lease is freed happens, none too late or too early."""
    freed: Counter[str] = Counter()
    faults: Counter[str] = Counter()
    for seed in range(100, 116):
        outcome = run(SqlitePlan(seed=seed))
        assert outcome.ok, f"seed {seed}: {outcome.violation}\n" + "\n".join(outcome.trace)
        freed += outcome.freed
        faults += outcome.faults
    assert set(freed) == {"proven", "expired", "observed"}, freed
    assert set(faults) == {"kill", "reuse", "pause", "step", "reboot"}, faults


def test_owner_values_carry_the_description_fencelock_reads(tmp_path: Path) -> None:
    """The put-back guess reads the start from the owner value, as the old code did."""
    world = SqliteWorld(SqlitePlan(seed=2), str(tmp_path))
    try:
        client = world.clients[0]
        world._start(client)
        described = holder_of(world._owner(client))
        assert described is not None
        assert client.proc is not None
        assert described.pid == client.proc.pid
        assert described.host == client.proc.machine.name
        assert described.started is not None or not client.proc.proc_ok
    finally:
        world.close()


def test_the_cli_runs_the_family(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--family", "sqlite", "--seed", "1", "--duration", "5"]) == 0
    assert "seed 1: ok" in capsys.readouterr().out
    assert main(["--family", "sqlite", "--seed", "0", "--bug", SQLITE_DEAD_HOLDER_GUESS]) == 1
    out = capsys.readouterr().out
    assert TWO in out
    assert "--bug sqlite-dead-holder-guess" in out
