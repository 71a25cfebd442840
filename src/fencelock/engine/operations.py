"""The operations the primitives' flows share (latch, multi-lock, read-write lock, semaphore):
take a name, give it back, list what is held under a prefix, wait for a name to be let
go; what each step came to; and how a flow that gave up says where. Data only."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Take:
    """Acquire ``name`` within ``timeout`` seconds (None: as long as it takes)."""

    name: str
    timeout: float | None


@dataclass(frozen=True)
class Give:
    """Release the lease on ``name`` the flow took."""

    name: str


@dataclass(frozen=True)
class ListHeld:
    """The leases held under ``prefix`` now, by anyone, with what each has left."""

    prefix: str


@dataclass(frozen=True)
class AwaitRelease:
    """Wait (at most ``timeout``; None: as long as it takes) until ``name`` is let go;
    take it and give it straight back. Granted if it was let go in time."""

    name: str
    timeout: float | None


@dataclass(frozen=True)
class Holding:
    """A lease :class:`ListHeld` found: its name, the seconds its TTL has left (None:
    the backend does not say), and its owner (None: not told)."""

    name: str
    remaining: float | None
    owner: str | None = None


@dataclass(frozen=True)
class Reply:
    """What a step came to: granted or not, the leases a :class:`ListHeld` found, and
    the time after it."""

    now: float
    granted: bool = True
    held: tuple[Holding, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        """The names of the leases found."""
        return tuple(h.name for h in self.held)


@dataclass(frozen=True)
class Blocked:
    """The flow gave up at ``name`` after ``waited`` seconds; give back what was taken."""

    name: str
    waited: float
