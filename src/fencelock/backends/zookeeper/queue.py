"""The lock queue's shape in ZooKeeper, without I/O: node names, order, who is next.

A lock ``NAME`` is the node ``<base>/NAME`` (a name's ``/`` parts are path
parts); each contender is an ephemeral sequential child ``<owner>__lock__<seq>``,
the names kazoo's ``Lock`` recipe gives its own contenders, so a lock held through
kazoo keeps fencelock out and the other way round. The child with the lowest
sequence number holds the lock; each waiter watches only the one just before it.
Children of other shapes (the queue nodes of longer names, ``NAME/...``) are not
contenders.

The same line shares a name natively (:class:`~fencelock.backends.base.Share`): a
reader ``<owner>__rlock__<seq>`` (kazoo's ``ReadLock`` names) waits only for the
writers before it and watches the nearest; a writer is an ordinary ``__lock__``
contender; a permit of N ``<owner>__sem<N>__<seq>`` holds while fewer than N
contenders are before it and, as any of them may leave, watches the line itself.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

from fencelock.backends.base import Share

MARKER = "__lock__"
# kazoo's read lock contenders queue in the same line (its ReadLock/WriteLock recipe)
_CONTENDER = re.compile(
    r"^(?P<owner>.*?)__(?P<kind>lock|rlock|sem(?P<permits>[1-9]\d*))__(?P<seq>\d{10})$"
)
Kind = Literal["lock", "read", "permit"]


@dataclass(frozen=True, order=True)
class Contender:
    sequence: int
    node: str  # the child's name, not its path
    owner: str  # the name's part before the marker (kazoo puts a uuid there)
    kind: Kind = "lock"
    permits: int = 1  # a permit's semaphore size


def queue_path(base: str, name: str) -> str:
    """The node whose children queue for ``name``."""
    return f"{base.rstrip('/')}/{name}"


def node_prefix(owner: str, share: Share | None = None) -> str:
    """What a contender of ``owner`` is created as (ZooKeeper appends the sequence)."""
    if share is None or share.kind == "write":
        return f"{owner}{MARKER}"
    if share.kind == "read":
        return f"{owner}__rlock__"
    return f"{owner}__sem{share.permits}__"


def contender(node: str) -> Contender | None:
    """The contender a child is, or None if it is something else (a longer name's queue)."""
    match = _CONTENDER.match(node)
    if match is None:
        return None
    seq, owner, marker = int(match["seq"]), match["owner"], match["kind"]
    if marker == "lock":
        return Contender(seq, node, owner)
    if marker == "rlock":
        return Contender(seq, node, owner, "read")
    return Contender(seq, node, owner, "permit", int(match["permits"]))


def blockers(ahead: list[Contender], kind: Kind, permits: int = 1) -> list[Contender]:
    """Who keeps a contender of ``kind`` waiting, given the contenders ``ahead`` of it
    (nearest last); [] if it holds. A reader waits for writers only; a permit of N
    for the N or more before it; anything else for everyone before it."""
    if kind == "read":
        return [entry for entry in ahead if entry.kind != "read"]
    if kind == "permit":
        return ahead if len(ahead) >= permits else []
    return ahead


def holders(entries: list[Contender]) -> list[Contender]:
    """The contenders of a line (holder first) that hold now."""
    return [e for i, e in enumerate(entries) if not blockers(entries[:i], e.kind, e.permits)]


def permits_in_use(entries: list[Contender], permits: int) -> int | None:
    """Another permit count than ``permits`` that a contender in line uses, if any."""
    return next((e.permits for e in entries if e.kind == "permit" and e.permits != permits), None)


def contenders(children: list[str]) -> list[Contender]:
    """The contenders among ``children``, the holder first."""
    return sorted(c for c in map(contender, children) if c is not None)


def ahead_of(children: list[str], mine: str) -> list[Contender] | None:
    """The contenders before ``mine``, nearest last ([]: ``mine`` holds the lock;
    None: ``mine`` is not among them any more)."""
    entries = contenders(children)
    for index, entry in enumerate(entries):
        if entry.node == mine:
            return entries[:index]
    return None


def mine_among(children: list[str], owner: str) -> str | None:
    """Our contender among ``children``: the create whose reply was lost may have made it."""
    return next((c.node for c in contenders(children) if c.owner == owner), None)


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


_PARTED = re.compile(r"^(?P<queue>.+\.(?:rw|sem))/(?:gate|r/\d+|p/\d+/\d+)$")


def shared(name: str) -> bool:
    """Whether ``name``'s line is a native read-write lock or semaphore, whose holders
    are listed one by one (as the generic primitives' parts are)."""
    return name.endswith((".rw", ".sem"))


def part_name(name: str, entry: Contender) -> str:
    """The name a holder of a shared line is listed under: a reader ``NAME.rw/r/<seq>``,
    the writer ``NAME.rw/gate``, a permit ``NAME.sem/p/<n>/<seq>`` (the generic
    primitives' part names, which ``status`` folds)."""
    if entry.kind == "read":
        return f"{name}/r/{entry.sequence}"
    if entry.kind == "permit":
        return f"{name}/p/{entry.permits}/{entry.sequence}"
    return f"{name}/gate"


def queue_of_part(name: str) -> str:
    """The queue a listed part belongs to (``NAME.rw/r/12`` → ``NAME.rw``); else ``name``."""
    match = _PARTED.match(name)
    return name if match is None else match["queue"]
