"""The read-write lock's two flows, without I/O, over ordinary leases.

Three kinds of names: the *gate* (``NAME.rw/gate``), one lease per reader in the
lowest free slot (``NAME.rw/r/<k>``: slots, not a fresh name per hold, as a backend
keeps a record for every name ever used), nothing else. A reader takes the gate,
registers in its reader slot, and lets the gate go: its hold is the reader lease. A
writer takes the gate and keeps it, then waits until no reader lease is left: its hold
is the gate. So:

- many readers at once (each holds the gate only for a moment);
- one writer, and no reader while it writes (readers queue on the gate it holds);
- writers are not starved: once a writer holds the gate, new readers wait behind it,
  and the readers already in drain;
- every hold's token is the gate's token at entry, so readers' and writers' tokens
  come from one counter and order against each other.

A writer waits for a reader by taking that reader's lease name (woken when it is
released or expires, as any waiter is) and giving it straight back. The flows yield
:class:`Take`, :class:`Give` and :class:`ListHeld`; the driver holds the leases.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

from fencelock.engine.deadline import deadline_after, time_left
from fencelock.engine.operations import Blocked, Give, ListHeld, Reply, Take

Op = Take | Give | ListHeld
RWFlow = Generator[Op, Reply, Blocked | None]


@dataclass(frozen=True)
class RWNames:
    """The names a read-write lock on ``name`` uses."""

    name: str

    @property
    def line(self) -> str:
        """The native queue (readers and writers in one line) where a backend has one."""
        return f"{self.name}.rw"

    @property
    def gate(self) -> str:
        return f"{self.name}.rw/gate"

    @property
    def readers(self) -> str:
        return f"{self.name}.rw/r/"

    def reader(self, slot: int) -> str:
        return f"{self.readers}{slot}"

    def free_slot(self, held: tuple[str, ...]) -> int:
        """The lowest reader slot no held reader is in."""
        taken = set(held)
        return next(k for k in range(len(taken) + 1) if self.reader(k) not in taken)


def read_flow(names: RWNames, timeout: float | None, now: float) -> RWFlow:
    """Take the gate, register as a reader, let the gate go. Holds: the reader lease."""
    started, deadline = now, deadline_after(now, timeout)
    reply = yield Take(names.gate, time_left(deadline, now))
    if not reply.granted:
        return Blocked(names.gate, reply.now - started)
    reply = yield ListHeld(names.readers)
    mine = names.reader(names.free_slot(reply.names))
    reply = yield Take(mine, 0)  # free: only the gate's holder takes a reader slot
    if not reply.granted:
        yield Give(names.gate)
        return Blocked(mine, reply.now - started)
    yield Give(names.gate)
    return None


def write_flow(names: RWNames, timeout: float | None, now: float) -> RWFlow:
    """Take the gate and keep it, then wait out every reader. Holds: the gate."""
    started, deadline = now, deadline_after(now, timeout)
    reply = yield Take(names.gate, time_left(deadline, now))
    if not reply.granted:
        return Blocked(names.gate, reply.now - started)
    while True:
        reply = yield ListHeld(names.readers)
        if not reply.names:
            return None
        reader = reply.names[0]
        reply = yield Take(reader, time_left(deadline, reply.now))
        if not reply.granted:
            yield Give(names.gate)
            return Blocked(reader, reply.now - started)
        yield Give(reader)
