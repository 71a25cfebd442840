"""The parent's bookkeeping for one round: the pause plan and the recorded events."""

from __future__ import annotations

import random

from fencelock.demo.model import Acquired, Hold, Released, Trace, WorkerPause, Wrote

# After a resume, the next pause comes at the 1st..3rd sale that finds nobody frozen.
GAP = (1, 3)


class PausePlan:
    """Decides, from a seeded RNG, which announced writes get frozen.

    Only one worker is frozen at a time, so the seat it read is always resold by
    the next holder of the lock while it sleeps.
    """

    def __init__(self, pauses: int, seed: int) -> None:
        rng = random.Random(seed)  # noqa: S311 (a seeded schedule, to replay)
        self._gaps = [rng.randint(*GAP) for _ in range(pauses)]
        self._count = 0

    def should_pause(self, someone_frozen: bool) -> bool:
        """Called once per announced write; True means freeze this writer now."""
        if someone_frozen or not self._gaps:
            return False
        self._count += 1
        if self._count < self._gaps[0]:
            return False
        self._gaps.pop(0)
        self._count = 0
        return True


class Recorder:
    """Turns worker messages and injected pauses into a :class:`Trace`."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.holds: list[Hold] = []
        self.pauses: list[WorkerPause] = []
        self.writes: list[Wrote] = []
        self.leases_lost = 0
        self._open: dict[int, Acquired] = {}

    def acquired(self, msg: Acquired) -> None:
        """A hold begins."""
        self._open[msg.worker] = msg

    def wrote(self, msg: Wrote) -> None:
        """A sale's transaction ended."""
        self.writes.append(msg)

    def released(self, msg: Released) -> None:
        """A hold ends; counts the lease as lost if the worker noticed."""
        start = self._open.pop(msg.worker)
        self.leases_lost += msg.lost
        trusted = msg.trusted_until if msg.lost else None
        self.holds.append(
            Hold(msg.worker, msg.token, start.at, msg.at, msg.lost, trusted, start.asked)
        )

    def paused(self, pause: WorkerPause) -> None:
        """A worker was frozen and let go again."""
        self.pauses.append(pause)

    def sold(self) -> int:
        """Distinct seats with an accepted sale so far."""
        return len({w.seat for w in self.writes if w.outcome != "rejected"})

    def resold_since(self, seat: int, since: float) -> bool:
        """True once another sale of ``seat`` was accepted after ``since``."""
        return any(w.seat == seat and w.at > since and w.outcome != "rejected" for w in self.writes)

    def count(self, outcome: str) -> int:
        """Writes with ``outcome`` (sold, double or rejected)."""
        return sum(w.outcome == outcome for w in self.writes)

    def trace(
        self, title: str, note: str, start: float, end: float, stats: tuple[tuple[str, int], ...]
    ) -> Trace:
        """The round as the timeline draws it."""
        return Trace(
            title,
            self.workers,
            start,
            end,
            note,
            tuple(self.holds),
            tuple(self.pauses),
            tuple(self.writes),
            stats,
        )
