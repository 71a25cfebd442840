"""The steps the primitives' flows share (multi-lock, read-write lock, semaphore): take
a name, give it back, and how a flow that gave up says where. Data only."""

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
class Blocked:
    """The flow gave up at ``name`` after ``waited`` seconds; give back what was taken."""

    name: str
    waited: float
