"""The semaphore's acquire flow, without I/O, over ordinary leases.

Names on ``NAME``: the *gate* (``NAME.sem/gate``), one lease per permit, in slots
(``NAME.sem/p/<permits>/<k>``, ``k < permits``, each renewed on its own: a crashed
holder's permit comes back after its TTL, Redisson's permit-expirable semaphore), and
the *bell* (``NAME.sem/bell``). Waiters queue on the gate; the one holding it counts
the permits and takes the lowest free slot if fewer than ``permits`` are held. Slots,
not a fresh name per permit: a backend keeps a record (its token counter) for every
name ever used, and a name per acquisition would grow that, and every count, without
end. If none is free it *arms* the bell (holds it), counts again (so a release between
the count and the wait is not missed), and waits for the bell to be let go: a holder
that gives its permit back *rings* it (evicts whoever holds it). A permit that expires
instead rings nothing, so the wait also ends when the first held permit's TTL runs
out. No polling.

The permit count is part of each permit's name: asking with another count while a
permit of the first is held is an error (:class:`PermitMismatch`). Each permit's token
is the gate's token at entry, one counter for all permits of the name.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

from fencelock.engine.deadline import deadline_after, time_left
from fencelock.engine.operations import AwaitRelease, Blocked, Give, Holding, ListHeld, Reply, Take

# A wait for the bell also ends this long after the first held permit's TTL would.
EXPIRY_MARGIN = 0.01


@dataclass(frozen=True)
class SemaphoreNames:
    name: str

    @property
    def line(self) -> str:
        """The native queue (one entry per permit) where a backend has one."""
        return f"{self.name}.sem"

    @property
    def gate(self) -> str:
        return f"{self.name}.sem/gate"

    @property
    def bell(self) -> str:
        return f"{self.name}.sem/bell"

    @property
    def permits(self) -> str:
        return f"{self.name}.sem/p/"

    def permit(self, permits: int, slot: int) -> str:
        return f"{self.permits}{permits}/{slot}"

    def free_slot(self, permits: int, held: tuple[Holding, ...]) -> int | None:
        """The lowest slot of ``permits`` no held permit is in; None if all are taken."""
        taken = {p.name for p in held}
        return next((k for k in range(permits) if self.permit(permits, k) not in taken), None)


@dataclass(frozen=True)
class Arm:
    """Hold the bell (not renewed; a no-op if this flow holds it already)."""

    name: str


@dataclass(frozen=True)
class Disarm:
    """Let the bell go if this flow still holds it."""

    name: str


@dataclass(frozen=True)
class PermitMismatch:
    """Permits of another count are held under the name."""

    held_with: int


Op = Take | Give | ListHeld | Arm | AwaitRelease | Disarm
SemaphoreFlow = Generator[Op, Reply, Blocked | PermitMismatch | None]


def counts_of(held: tuple[Holding, ...], names: SemaphoreNames) -> set[int]:
    """The permit counts the held permits were taken with."""
    counts = set()
    for permit in held:
        text = permit.name[len(names.permits) :].split("/", 1)[0]
        if text.isdigit():
            counts.add(int(text))
    return counts


def wake_after(held: tuple[Holding, ...]) -> float | None:
    """When the first held permit would expire by its TTL (None if none says)."""
    known = [p.remaining for p in held if p.remaining is not None]
    return min(known) + EXPIRY_MARGIN if known else None


def _earliest(*timeouts: float | None) -> float | None:
    known = [t for t in timeouts if t is not None]
    return max(0.0, min(known)) if known else None


def acquire_flow(
    names: SemaphoreNames, permits: int, timeout: float | None, now: float
) -> SemaphoreFlow:
    """Take one of ``permits`` permits within ``timeout``. Holds, when it returns None:
    one permit slot's lease."""
    started, deadline = now, deadline_after(now, timeout)
    reply = yield Take(names.gate, time_left(deadline, now))
    if not reply.granted:
        return Blocked(names.gate, reply.now - started)
    armed = False
    while True:
        reply = yield ListHeld(names.permits)
        others = counts_of(reply.held, names) - {permits}
        if others:
            if armed:
                yield Disarm(names.bell)
            yield Give(names.gate)
            return PermitMismatch(min(others))
        slot = names.free_slot(permits, reply.held)
        if slot is not None:
            reply = yield Take(names.permit(permits, slot), 0)
            if armed:
                yield Disarm(names.bell)
            yield Give(names.gate)
            return None if reply.granted else Blocked(names.permits, reply.now - started)
        if not armed:
            yield Arm(names.bell)
            armed = True
            continue  # count again: a release may have come before the bell was armed
        left = time_left(deadline, reply.now)
        if left is not None and left <= 0:
            yield Disarm(names.bell)
            yield Give(names.gate)
            return Blocked(names.permits, reply.now - started)
        rung = yield AwaitRelease(names.bell, _earliest(wake_after(reply.held), left))
        armed = not rung.granted  # a rung bell is let go; an unrung one is still ours
