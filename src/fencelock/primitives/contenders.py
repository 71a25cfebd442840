"""Who contends for a lock (kazoo's ``Lock.contenders()``): its holder, then its waiters.

Written once for sync and async: a driver (``Lock.contenders``, ``AsyncLock.contenders``)
reads the backend's line of waiters (``waiters``), then the holder (``inspect``), and
:func:`line_of` puts the two together. The line is read first: a waiter granted the
lock between the two looks is then the holder the second one finds, listed once, at the
head (read the other way round it would be in neither look). A waiter that leaves the
line meanwhile may still be listed: the list is what the backend said a moment ago.
"""

from __future__ import annotations

from fencelock.backends.base import LockInfo
from fencelock.holder import Holder, contender_of


def line_of(waiting: list[str] | None, info: LockInfo | None) -> list[Holder]:
    """The holder ``info`` names (if it is held), then the owners ``waiting`` in line
    (None: the backend keeps no line, so the holder alone), each as the process it
    describes (:data:`~fencelock.holder.UNKNOWN` where its owner value says nothing)."""
    holder = info.owner if info is not None and info.held else None
    owners = [] if holder is None else [holder]
    owners += [owner for owner in waiting or () if owner != holder]
    return [contender_of(owner) for owner in owners]
