"""The multi-lock's acquire flow, without I/O: all names or none, in one global order.

Two multi-locks over overlapping names never deadlock because both take their names in
the same order (sorted), so neither can hold a later name while waiting for an earlier
one the other holds. The flow yields :class:`Take` for each name with the time left of
the one deadline and receives a :class:`Reply`; when a name is not granted in time it
returns :class:`Blocked`, and the driver gives back what it took (newest first).
"""

from __future__ import annotations

from collections.abc import Generator, Iterable

from fencelock.engine.deadline import deadline_after, time_left
from fencelock.engine.names import validate_name
from fencelock.engine.operations import Blocked, Reply, Take
from fencelock.errors import ConfigError

MultiFlow = Generator[Take, Reply, Blocked | None]


def ordered(names: Iterable[str]) -> tuple[str, ...]:
    """The names, checked, without repeats, in the one global order; ConfigError if none."""
    if isinstance(names, str):
        raise ConfigError("a multi-lock takes a list of names, not one str")
    unique = sorted({validate_name(name) for name in names})
    if not unique:
        raise ConfigError("a multi-lock needs at least one name")
    return tuple(unique)


def multi_acquire_flow(names: tuple[str, ...], timeout: float | None, now: float) -> MultiFlow:
    """Take ``names`` in order within one ``timeout``; None when all are held."""
    started = now
    deadline = deadline_after(now, timeout)
    for name in names:
        took = yield Take(name, time_left(deadline, now))
        now = took.now
        if not took.granted:
            return Blocked(name, now - started)
    return None
