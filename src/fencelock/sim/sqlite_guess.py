"""The embedded backend's dead-holder guess before 599fe11, put back as a patch of
:mod:`fencelock.backends.sqlite.liveness` (``--bug sqlite-dead-holder-guess``).

Before that commit a row written in another boot was free (``boot != excluded.boot``
in the take), the expiry was read on the waiter's clock whatever its time namespace,
and a holder in the waiter's boot and PID namespace was dead when the PID, looked up
in whatever /proc the waiter read, ran nothing or a process whose start, in wall
seconds (btime plus its start ticks), differed from the one its owner value carries:
a clock step moves btime, a time namespace moves the ticks /proc shows, and another
PID namespace's /proc names other processes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from fencelock.backends.sqlite import liveness
from fencelock.holder import holder_of
from fencelock.sim.put_back import put_back_by

SQLITE_DEAD_HOLDER_GUESS = "sqlite-dead-holder-guess"

HZ = 100  # clock ticks a second (sysconf CLK_TCK)

# btime (the wall clock's time at boot, /proc/stat) of each simulated boot id, as its
# host shows it now; a boot not listed reads the real /proc/stat.
btimes: dict[str, Callable[[], float]] = {}


def _btime(boot: str | None) -> float | None:
    read = btimes.get(boot or "")
    if read is not None:
        return read()
    try:
        with open("/proc/stat") as system:
            return next(float(line.split()[1]) for line in system if line.startswith("btime "))
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def _shares_clock(row: liveness.Recorded, here: liveness.Here) -> bool:
    """One clock per boot: the time namespace not looked at."""
    return here.boot is not None and row.boot == here.boot


def _remaining(row: liveness.Recorded, here: liveness.Here, now: float) -> float | None:
    """A row of another boot is free; any other expires on the waiter's clock."""
    if row.owner is None or not _shares_clock(row, here):
        return None
    left = row.expires_at - now
    return left if left > 0 else None


def _judged_here(row: liveness.Recorded, here: liveness.Here) -> bool:
    """Same boot and PID namespace, and a start in the owner value: judged by its PID."""
    described = holder_of(row.owner)
    return (
        row.owner is not None
        and row.pid is not None
        and row.pidns is not None
        and row.pidns == here.pidns
        and _shares_clock(row, here)
        and described is not None
        and described.started is not None
    )


def _dead(row: liveness.Recorded, here: liveness.Here, process: liveness.Process) -> bool:
    """Dead unless the PID runs a process started in the same wall second (btime-derived)."""
    if not _judged_here(row, here):
        return False
    if not isinstance(process, int):
        return True  # /proc/PID/stat unreadable: taken for not running
    described = holder_of(row.owner)
    btime = _btime(here.boot)
    if described is None or described.started is None or btime is None:
        return False
    return f"{btime + process / HZ:.0f}" != f"{described.started:.0f}"


@contextlib.contextmanager
def _guessing() -> Iterator[None]:
    """Within: liveness's rule is the guess it replaced."""
    patched = {
        "shares_clock": _shares_clock,
        "remaining": _remaining,
        "judged_here": _judged_here,
        "dead": _dead,
    }
    fixed = {name: getattr(liveness, name) for name in patched}
    for name, guess in patched.items():
        setattr(liveness, name, guess)
    try:
        yield
    finally:
        for name, rule in fixed.items():
            setattr(liveness, name, rule)


put_back_by(
    SQLITE_DEAD_HOLDER_GUESS,
    "the SQLite backend taking a lease whose holder it guessed dead: another boot's row "
    "free, expiry on a time namespace's clock, a start in wall seconds, another /proc",
    _guessing,
)
