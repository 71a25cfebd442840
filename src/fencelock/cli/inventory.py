"""What the held leases are, for ``status`` and ``list``: plain locks, and the parts of
read-write locks, semaphores, latches and elections folded into one line each.

The coordination primitives are built from ordinary leases with recognisable names
(docs/primitives.md): ``NAME.rw/gate`` and ``NAME.rw/r/<id>``, ``NAME.sem/p/<n>/<id>``
(with ``NAME.sem/gate`` and ``NAME.sem/bell`` while someone waits), ``NAME.latch/closed``
and ``NAME.latch/c/<k>``, ``NAME.leader/<value>`` beside the lock ``NAME``, a group's
``NAME.members/<member>`` and ``NAME.data/<member>.<data>``. Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fencelock.backends.base import LockInfo
from fencelock.primitives.election import decode_value

# the primitive's own name, its kind, and the part's path within it
_PART = re.compile(r"^(?P<name>.+)\.(?P<kind>rw|sem|latch|leader|members|data)/(?P<rest>.+)$")


@dataclass
class Entry:
    """One line of the inventory: a plain lock, or a primitive with its parts."""

    name: str
    kind: str  # "lock", "read-write lock", "semaphore", "latch", "election", "group"
    infos: list[LockInfo] = field(default_factory=list)
    readers: list[LockInfo] = field(default_factory=list)
    writer: LockInfo | None = None
    permits: list[LockInfo] = field(default_factory=list)
    of: int | None = None  # a semaphore's permit count
    waiting: bool = False  # a waiter holds a semaphore's gate or bell
    counts: int = 0  # a latch's counts left
    leader: LockInfo | None = None
    value: str | None = None
    members: list[str] = field(default_factory=list)  # a group's member ids

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"name": self.name, "kind": self.kind}
        if self.kind == "read-write lock":
            out["readers"] = len(self.readers)
            out["writer_token"] = None if self.writer is None else self.writer.token
        elif self.kind == "semaphore":
            out["held"], out["permits"] = len(self.permits), self.of
            out["tokens"] = [p.token for p in self.permits]
        elif self.kind == "latch":
            out["count"] = self.counts
        elif self.kind == "election":
            leader = self.leader
            out["term"] = None if leader is None else leader.token
            out["value"] = self.value
        elif self.kind == "group":
            out["members"] = sorted(self.members)
        return out


def _entry(entries: dict[str, Entry], name: str, kind: str) -> Entry:
    entry = entries.get(name)
    if entry is None or entry.kind == "lock":
        entry = Entry(name, kind, infos=[] if entry is None else entry.infos)
        entries[name] = entry
    return entry


def group(infos: list[LockInfo]) -> list[Entry]:
    """The held leases as inventory lines, sorted by name."""
    entries: dict[str, Entry] = {}
    values: dict[str, list[str | None]] = {}
    for info in infos:
        if info.held:
            _fold(entries, values, info)
    for name, announced in values.items():
        lock = entries.get(name)
        if lock is not None and lock.infos:
            value = announced[0] if len(announced) == 1 else None
            lock.kind, lock.leader, lock.value = "election", lock.infos[0], value
    return [entries[name] for name in sorted(entries)]


def _fold(entries: dict[str, Entry], values: dict[str, list[str | None]], info: LockInfo) -> None:
    """Add one held lease to the entry it is (a part of)."""
    part = _PART.match(info.name)
    if part is None:
        entries.setdefault(info.name, Entry(info.name, "lock")).infos.append(info)
        return
    name, kind, rest = part["name"], part["kind"], part["rest"]
    if kind == "leader":
        values.setdefault(name, []).append(decode_value(rest))
    elif kind in ("members", "data"):
        entry = _entry(entries, name, "group")
        member = decode_value(rest) if kind == "members" else None
        if member is not None:
            entry.members.append(member)
    elif kind == "rw":
        entry = _entry(entries, name, "read-write lock")
        if rest == "gate":
            entry.writer = info
        else:
            entry.readers.append(info)
    elif kind == "sem":
        entry = _entry(entries, name, "semaphore")
        if rest.startswith("p/"):
            entry.permits.append(info)
            count = rest.split("/")[1]
            entry.of = int(count) if count.isdigit() else entry.of
        else:
            entry.waiting = True
    else:
        _entry(entries, name, "latch").counts += rest.startswith("c/")


def describe_entry(entry: Entry, plain: str) -> str:
    """One line for ``entry``; ``plain`` is how a plain lock's line reads."""
    if entry.kind == "read-write lock":
        readers = len(entry.readers)
        if entry.writer is not None and not readers:
            return f"{entry.name}: read-write lock, written (token {entry.writer.token})"
        waiting = ", a writer waiting" if entry.writer is not None else ""
        return f"{entry.name}: read-write lock, {readers} reader(s){waiting}"
    if entry.kind == "semaphore":
        of = "?" if entry.of is None else str(entry.of)
        waiting = ", waiters" if entry.waiting else ""
        tokens = ", ".join(str(p.token) for p in sorted(entry.permits, key=lambda p: p.token))
        return f"{entry.name}: semaphore, {len(entry.permits)} of {of} permits held{waiting}" + (
            f" (tokens {tokens})" if tokens else ""
        )
    if entry.kind == "latch":
        return f"{entry.name}: latch, count {entry.counts}"
    if entry.kind == "group":
        listed = ", ".join(sorted(entry.members))
        return f"{entry.name}: group, {len(entry.members)} member(s)" + (
            f" ({listed})" if listed else ""
        )
    if entry.kind == "election":
        value = "" if entry.value is None else f" {entry.value!r}"
        term = entry.leader.token if entry.leader is not None else "?"
        return f"{entry.name}: election, leader{value} (term {term})"
    return plain
