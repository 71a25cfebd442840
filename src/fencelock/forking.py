"""The one owner of what fencelock holds across ``fork()``.

A forked child is a copy of its parent made from one thread: the parent's other
threads do not exist in it, locks they held stay held forever, and sockets, event
loops (their epoll sets) and SQLite connections are shared with the parent, so
the child must not use them, nor close them (closing a loop or a TLS connection
would unregister or shut down what the parent still uses).

Every object that owns such things registers here and gets one call in each
forked child, ``_reset_after_fork()``, in which it drops the parent's resources
(:func:`abandon`) and starts afresh: new locks, no threads (made again on first
use), new connections. Objects are held by weak reference, so registering keeps
nothing alive. This is the only ``os.register_at_fork`` in fencelock.

Nothing is done before the fork or in the parent: no lock needs holding across
it, since the child never trusts any of the parent's state (its leases included).
"""

from __future__ import annotations

import os
import weakref
from typing import Protocol

from fencelock.log import log


class ForkAware(Protocol):
    def _reset_after_fork(self) -> None:
        """In a forked child: forget the parent's threads, locks and connections."""


_registered: dict[int, weakref.ref[ForkAware]] = {}
# The parent's objects a child must neither use nor finalize; kept until it exits.
_abandoned: list[object] = []


def _forget(ref: weakref.ref[ForkAware]) -> None:
    _registered.pop(id(ref), None)


def register(obj: ForkAware) -> None:
    """Call ``obj._reset_after_fork()`` in every child forked while ``obj`` lives."""
    ref = weakref.ref(obj, _forget)
    _registered[id(ref)] = ref


def abandon(*objects: object) -> None:
    """In a child: keep the parent's ``objects`` alive, unused, until the child exits."""
    _abandoned.extend(obj for obj in objects if obj is not None)


def _after_fork_in_child() -> None:
    # Snapshot first: a reset may register new objects (new locks, pools).
    for ref in list(_registered.values()):
        obj = ref()
        if obj is None:
            continue
        try:
            obj._reset_after_fork()
        except Exception:  # one failed reset must not leave the others undone
            log.exception("fencelock: resetting %r in a forked child failed", obj)


os.register_at_fork(after_in_child=_after_fork_in_child)
