"""Historical bugs the simulator puts back by patching the code under test, so that
nothing in the library reads a switch for them: each registered here in
:mod:`fencelock.engine.reintroduced`'s registry, so ``--bug NAME`` and
``reintroduced(NAME)`` take it as they take the library's own switches."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from fencelock.engine import reintroduced
from fencelock.sim import sqlite_guess  # noqa: F401 - registers sqlite-dead-holder-guess

REDIS_REUSED_OWNER = "redis-reused-owner"


@contextlib.contextmanager
def _reused_owner() -> Iterator[None]:
    """Redis before 1631548: every try of an acquisition stored the attempt's one owner
    value, also after a try went unanswered; that try's undo, once the server answered
    again, named the same owner and deleted the grant of a later try."""
    from fencelock.backends.redis.attempt import UndoTracker

    def keep_owner(tracker: UndoTracker) -> str | None:
        return None  # no fresh owner, nothing handed over: the unanswered flag stays

    fixed = UndoTracker.before_try
    setattr(UndoTracker, "before_try", keep_owner)  # noqa: B010 - a patch, undone below
    try:
        yield
    finally:
        setattr(UndoTracker, "before_try", fixed)  # noqa: B010


reintroduced.KNOWN[REDIS_REUSED_OWNER] = (
    "a Redis try after an unanswered one storing the same owner, whose late undo deleted it"
)
reintroduced.put_back_by(REDIS_REUSED_OWNER, _reused_owner)
