"""``lock.contenders()``'s listing, without I/O: the holder first, then the line, each
contender once, and an owner value that describes no process kept in its place."""

from __future__ import annotations

from fencelock.backends.base import LockInfo
from fencelock.holder import UNKNOWN, holder_of
from fencelock.primitives.contenders import line_of
from fencelock.primitives.lock import new_owner


def held_by(owner: str | None) -> LockInfo:
    return LockInfo("jobs/nightly", owner, 7, None if owner is None else 10.0)


def test_the_holder_then_the_line() -> None:
    holder, first, second = new_owner(), new_owner(), new_owner()
    assert line_of([first, second], held_by(holder)) == [holder_of(holder)] * 3
    assert line_of([], held_by(holder)) == [holder_of(holder)]
    assert line_of([], None) == []
    assert line_of(None, held_by(None)) == []


def test_a_waiter_granted_between_the_two_reads_is_listed_once() -> None:
    first, second = "a" * 40, "b" * 40  # owner values without a description
    assert len(line_of([first, second], held_by(first))) == 2


def test_no_line_the_holder_alone_and_unknown_owners_in_their_place() -> None:
    assert line_of(None, held_by("0" * 40)) == [UNKNOWN]
    mine = new_owner()
    assert line_of(["kazoo-uuid", mine, ""], held_by(None)) == [UNKNOWN, holder_of(mine), UNKNOWN]
