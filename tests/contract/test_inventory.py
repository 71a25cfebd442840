"""``status`` and ``list`` fold every primitive into one line, the same on every backend,
whether the primitive is built from the generic parts or natively (ZooKeeper)."""

from __future__ import annotations

import fencelock
from fencelock.backends.base import holds_latches
from fencelock.cli.inventory import group
from fencelock.primitives.blocks import Releasable


def test_each_primitive_is_one_line_with_its_holders(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    readers = [c.rw_lock(f"{name}/rw").read().acquire(timeout=10) for c in (client, other)]
    permits = [c.semaphore(f"{name}/sem", permits=3).acquire(timeout=10) for c in (client, other)]
    keeps_latches = holds_latches(client.internals.backend)
    if keeps_latches:
        assert client.latch(f"{name}/latch").try_set_count(2)
    entries = {entry.name: entry for entry in group(client.list(name))}
    rw, sem = entries[f"{name}/rw"], entries[f"{name}/sem"]
    assert rw.kind == "read-write lock"
    assert rw.writer is None
    assert len(rw.readers) == 2  # a generic reader's listed lease is its slot's, not its gate's
    assert sem.kind == "semaphore"
    assert sem.of == 3
    assert len(sem.permits) == 2
    if keeps_latches:
        assert entries[f"{name}/latch"].kind == "latch"
        assert entries[f"{name}/latch"].counts == 2
    holds: list[Releasable] = [*readers, *permits]
    for hold in holds:
        hold.release()
    with client.rw_lock(f"{name}/rw").write() as writing:
        (entry,) = group(client.list(f"{name}/rw"))
        assert entry.writer is not None
        assert entry.writer.token == writing.token
        assert entry.readers == []
