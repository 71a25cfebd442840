"""Plain data shared by the demo's parent, its workers and the timeline renderer.

Workers send the messages below to the parent over a pipe; the parent turns
them into a :class:`Trace` (what the timeline draws) and a :class:`RoundResult`
(what the table shows). Times are :func:`fencelock.clock.now` readings, one
clock for every process on the host.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

LOCK_NAME = "show/42"

Outcome = Literal["sold", "double", "rejected"]


class DemoError(Exception):
    """The demo could not run as scripted (a worker failed, a round hung)."""


@dataclass(frozen=True)
class Options:
    """Knobs of ``fencelock demo``."""

    workers: int = 4
    seats: int = 24
    ttl: float = 0.6
    pauses: int = 3
    seed: int = 7
    out: Path = Path("fencelock-demo")
    work: float = 0.08  # mean seconds of "work" between reading a seat and selling it


@dataclass(frozen=True)
class RoundSpec:
    """One round: a fresh shop and lock database, with or without fencing."""

    number: int
    title: str
    fenced: bool
    directory: Path

    @property
    def locks_path(self) -> Path:
        """The round's lock database (the SQLite backend's file)."""
        return self.directory / "locks.db"

    @property
    def shop_path(self) -> Path:
        """The round's shop database: seats, sales log and fences."""
        return self.directory / "shop.db"

    @property
    def locks_url(self) -> str:
        """``sqlite:////abs/path/locks.db``."""
        return "sqlite:///" + str(self.locks_path.resolve())


@dataclass(frozen=True)
class WorkerSpec:
    """Everything a worker process needs (picklable, for the spawn start method)."""

    worker: int
    locks_url: str
    shop_path: str
    fenced: bool
    ttl: float
    work: float
    seed: int


# Worker -> parent messages.


@dataclass(frozen=True)
class FromWorker:
    """What every message of a worker to the parent says first: which worker it is."""

    worker: int


@dataclass(frozen=True)
class Ready(FromWorker):
    """The worker is connected and waits for the start signal."""


@dataclass(frozen=True)
class Acquired(FromWorker):
    """The lease with ``token`` was granted at ``at``, after asking for it at ``asked``."""

    token: int
    asked: float
    at: float


@dataclass(frozen=True)
class Intent(FromWorker):
    """About to write ``seat`` with ``token``; the worker waits for a go-ahead byte."""

    seat: int
    token: int
    at: float


@dataclass(frozen=True)
class Wrote(FromWorker):
    """The sale's transaction ended: committed (sold, double) or rolled back (rejected)."""

    seat: int
    token: int
    at: float
    outcome: Outcome


@dataclass(frozen=True)
class Released(FromWorker):
    """The lease is given back; ``lost`` if the worker noticed it had been lost."""

    token: int
    at: float
    lost: bool
    trusted_until: float


@dataclass(frozen=True)
class Done(FromWorker):
    """The show is sold out; the worker exits."""


@dataclass(frozen=True)
class Failed(FromWorker):
    """The worker hit an error it cannot recover from."""

    message: str


Message = Ready | Acquired | Intent | Wrote | Released | Done | Failed


# What the timeline draws.


@dataclass(frozen=True)
class Hold:
    """A lease from acquire to release; ``lost`` leases stopped being safe at ``trusted_until``."""

    worker: int
    token: int
    start: float
    end: float
    lost: bool = False
    trusted_until: float | None = None
    asked: float | None = None  # when the worker started waiting for it


@dataclass(frozen=True)
class WorkerPause:
    """A SIGSTOP..SIGCONT interval of one worker."""

    worker: int
    start: float
    end: float
    token: int
    seat: int


@dataclass(frozen=True)
class Trace:
    """Everything that happened in one round, in seconds of the shared clock."""

    title: str
    workers: int
    start: float
    end: float
    note: str = ""
    holds: tuple[Hold, ...] = ()
    pauses: tuple[WorkerPause, ...] = ()
    writes: tuple[Wrote, ...] = ()  # every sale, as its worker reported it
    stats: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, kw_only=True)
class RoundResult:
    """The counts the table shows for one round."""

    number: int
    title: str
    fenced: bool
    seats: int
    seats_sold: int
    sales: int
    sold_twice: int
    stale_rejected: int
    pauses: int
    leases_lost: int
    seconds: float
    trace: Trace = field(repr=False, compare=False)

    def as_dict(self) -> dict[str, object]:
        """The JSON form (without the trace)."""
        return {
            "round": self.number,
            "title": self.title,
            "fenced": self.fenced,
            "seats": self.seats,
            "seats_sold": self.seats_sold,
            "sales": self.sales,
            "sold_twice": self.sold_twice,
            "stale_rejected": self.stale_rejected,
            "pauses": self.pauses,
            "leases_lost": self.leases_lost,
            "seconds": round(self.seconds, 3),
        }
