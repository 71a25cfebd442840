"""The lock queue's shape in ZooKeeper, without I/O: node names, order, who is next.

A lock ``NAME`` is the node ``<base>/NAME`` (a name's ``/`` parts are path
parts); each contender is an ephemeral sequential child ``<owner>__lock__<seq>``,
the names kazoo's ``Lock`` recipe gives its own contenders, so a lock held through
kazoo keeps fencelock out and the other way round. The child with the lowest
sequence number holds the lock; each waiter watches only the one just before it.
Children of other shapes (the queue nodes of longer names, ``NAME/...``) are not
contenders.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

MARKER = "__lock__"
# kazoo's read lock contenders queue in the same line (its ReadLock/WriteLock recipe)
_CONTENDER = re.compile(r"^(?P<owner>.*?)__(?:lock|rlock)__(?P<seq>\d{10})$")


@dataclass(frozen=True, order=True)
class Contender:
    sequence: int
    node: str  # the child's name, not its path
    owner: str  # the name's part before the marker (kazoo puts a uuid there)


def queue_path(base: str, name: str) -> str:
    """The node whose children queue for ``name``."""
    return f"{base.rstrip('/')}/{name}"


def node_prefix(owner: str) -> str:
    """What a contender of ``owner`` is created as (ZooKeeper appends the sequence)."""
    return f"{owner}{MARKER}"


def contender(node: str) -> Contender | None:
    """The contender a child is, or None if it is something else (a longer name's queue)."""
    match = _CONTENDER.match(node)
    if match is None:
        return None
    return Contender(int(match["seq"]), node, match["owner"])


def line(children: list[str]) -> list[Contender]:
    """The contenders among ``children``, the holder first."""
    return sorted(c for c in map(contender, children) if c is not None)


def ahead_of(children: list[str], mine: str) -> list[Contender] | None:
    """The contenders before ``mine``, nearest last ([]: ``mine`` holds the lock;
    None: ``mine`` is not among them any more)."""
    entries = line(children)
    for index, entry in enumerate(entries):
        if entry.node == mine:
            return entries[:index]
    return None


def mine_among(children: list[str], owner: str) -> str | None:
    """Our contender among ``children``: the create whose reply was lost may have made it."""
    prefix = node_prefix(owner)
    return next((c.node for c in line(children) if c.node.startswith(prefix)), None)


def node_data(owner: str, session_timeout: float) -> bytes:
    """A contender's data: its owner and how long its session lasts unheard."""
    return f"{owner} {session_timeout:g}".encode()


def recorded_timeout(data: bytes) -> float | None:
    """The session timeout a fencelock contender recorded (None: another client's node)."""
    _, _, timeout = data.decode(errors="replace").partition(" ")
    try:
        seconds = float(timeout)
    except ValueError:
        return None
    return seconds if 0 < seconds < math.inf else None
