"""Which Redis Cluster master holds a lock: its slot and the cluster's slot map (no I/O).

Every key of one lock is hash-tagged with the lock's name (``fencelock:{NAME}…``), so a
lock lives in one slot, on one master, and its scripts run there whole. The map comes
from ``CLUSTER SLOTS``; a ``MOVED`` reply or a node gone says it is out of date.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from redis.crc import key_slot

from fencelock.backends.redis.scripts import LockKeys

SLOTS = 16384
Address = tuple[str, int]


def slot_of(name: str) -> int:
    """The cluster slot of lock ``name`` (all its keys share it)."""
    return int(key_slot(LockKeys.of(name).lock.encode()))


@dataclass(frozen=True)
class SlotMap:
    """Slot ranges, sorted by their first slot, each with the master serving it."""

    starts: tuple[int, ...]
    ranges: tuple[tuple[int, int, Address], ...]

    @classmethod
    def from_reply(cls, reply: Sequence[Sequence[object]]) -> SlotMap:
        """Read ``CLUSTER SLOTS``: ``[[first, last, [host, port, id…], replicas…], …]``."""
        ranges = []
        for entry in reply:
            first, last, master = entry[0], entry[1], entry[2]
            assert isinstance(first, int) and isinstance(last, int)
            assert isinstance(master, Sequence) and not isinstance(master, str)
            host, port = master[0], master[1]
            ranges.append((first, last, (_text(host), int(str(port)))))
        ranges.sort()
        return cls(tuple(first for first, _, _ in ranges), tuple(ranges))

    def master_for(self, slot: int) -> Address | None:
        """The master serving ``slot``; None if no node serves it (the cluster is down there)."""
        at = bisect.bisect_right(self.starts, slot) - 1
        if at < 0:
            return None
        first, last, address = self.ranges[at]
        return address if first <= slot <= last else None

    @property
    def masters(self) -> list[Address]:
        """Every master, each once, in slot order."""
        return list(dict.fromkeys(address for _, _, address in self.ranges))

    @property
    def complete(self) -> bool:
        """Whether every slot is served."""
        covered = 0
        for first, last, _ in self.ranges:
            if first != covered:
                return False
            covered = last + 1
        return covered == SLOTS


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
