"""A name kept taken after its lease ends (run-once's ``at_least``), on ZooKeeper, where a
lease's node ends with its session.

The keep is a persistent child of the name's line, ``#keep`` (``#`` is in no lock name),
its data the owner and the seconds to keep, written in the same transaction that deletes
the holder's node. ZooKeeper stamps every write with the leader's clock (``mtime``), so
the keep ends ``seconds`` after that stamp by the server's clock. A contender that
reaches the head of the line finds the mark in the listing it makes anyway; only then
does it read the mark and learn the server's time now from a write of its own (its own
node's data, set again), and waits out what is left or deletes the expired mark.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

MARK = "#keep"


@dataclass(frozen=True)
class AtLeastMark:
    owner: str
    seconds: float
    stamped_ms: int  # the mark's mtime: the server's clock when it was written

    def left(self, now_ms: int) -> float:
        """Seconds the name stays kept at the server's ``now_ms`` (<= 0: ended)."""
        return (self.stamped_ms + self.seconds * 1000 - now_ms) / 1000

    def left_by_this_clock(self) -> float:
        """An estimate by this host's clock, for ``status`` only (acquire asks the server)."""
        return self.left(int(time.time() * 1000))


def mark_path(queue: str) -> str:
    return f"{queue}/{MARK}"


def mark_data(owner: str, seconds: float) -> bytes:
    return f"{owner} {seconds!r}".encode()


def read_mark(data: bytes, mtime: int) -> AtLeastMark | None:
    """The keep a mark records; None if its data is not one (left as not kept)."""
    owner, _, seconds = data.decode(errors="replace").partition(" ")
    try:
        kept = float(seconds)
    except ValueError:
        return None
    return AtLeastMark(owner, kept, mtime) if kept > 0 else None
