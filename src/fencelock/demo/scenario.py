"""The parent's choreography: start the sellers, freeze some mid-sale, tally the shop.

Each round starts ``workers`` processes on a fresh shop and lock database.
Every worker announces each write (seat and token) and waits for a go-ahead;
the :class:`~fencelock.demo.recorder.PausePlan` picks some of those moments to
SIGSTOP the writer for 1.5 times the TTL (and until another worker has resold
its seat), then lets it go to make its stale write.
"""

from __future__ import annotations

import multiprocessing
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Protocol

import fencelock
from fencelock import clock
from fencelock.demo import shop, worker
from fencelock.demo.model import (
    Acquired,
    DemoError,
    Done,
    Failed,
    Intent,
    Message,
    Options,
    Ready,
    Released,
    RoundResult,
    RoundSpec,
    WorkerPause,
    WorkerSpec,
    Wrote,
)
from fencelock.demo.recorder import PausePlan, Recorder
from fencelock.toolkit.processes import ProcessPauser, resume
from fencelock.toolkit.resources import remove_database

PAUSE_TTLS = 1.5  # a pause lasts 1.5 times the TTL ...
MAX_PAUSE_TTLS = 10.0  # ... or until the seat is resold, but never longer than this
ROUND_LIMIT = 60.0
FREEZE_ATTEMPTS = 200  # tries to catch a worker outside a lock-database transaction
_NOTES = {
    False: "each sale is a plain UPDATE of the seat",
    True: "each sale checks the lease's token with sqlite_fence() in the same transaction",
}
GO = b"g"


class Reporter(Protocol):
    """Where the scenario tells its story while it runs."""

    def round_started(self, spec: RoundSpec, seats: int) -> None:
        """A round begins on a fresh shop of ``seats`` seats."""

    def progress(self, sold: int) -> None:
        """``sold`` distinct seats have been sold so far in this round."""

    def note(self, text: str, kind: str) -> None:
        """A notable event; ``kind`` is pause, resume, double, rejected or lost."""


@dataclass
class _Worker:
    number: int
    process: BaseProcess
    conn: Connection

    @property
    def pid(self) -> int:
        assert self.process.pid is not None
        return self.process.pid


@dataclass(frozen=True)
class _Frozen:
    worker: _Worker
    intent: Intent
    since: float
    due: float


def _start_workers(spec: RoundSpec, options: Options) -> list[_Worker]:
    ctx = multiprocessing.get_context("spawn")
    workers = []
    for number in range(1, options.workers + 1):
        parent_end, child_end = ctx.Pipe()
        args = WorkerSpec(
            number,
            spec.locks_url,
            str(spec.shop_path),
            spec.fenced,
            options.ttl,
            options.work,
            options.seed,
        )
        process = ctx.Process(
            target=worker.main,
            args=(args, child_end),
            name=f"fencelock-demo-worker-{number}",
            daemon=True,
        )
        process.start()
        child_end.close()
        workers.append(_Worker(number, process, parent_end))
    return workers


def _stop_workers(workers: list[_Worker], finished: bool) -> None:
    """Join finished workers; kill the rest (after a failure) without waiting."""
    for w in workers:
        resume(w.pid)
        w.process.join(timeout=5 if finished else 0)
        if w.process.is_alive():
            w.process.kill()
            w.process.join()
        w.conn.close()


class Conductor:
    """Runs one round's message loop: forwards go-aheads, injects and ends pauses."""

    def __init__(
        self, spec: RoundSpec, options: Options, workers: list[_Worker], reporter: Reporter
    ) -> None:
        self.spec, self.options, self.reporter = spec, options, reporter
        self.live = {w.number: w for w in workers}
        self.plan = PausePlan(options.pauses, options.seed)
        self.recorder = Recorder(options.workers)
        self.pauser = ProcessPauser([spec.locks_path], FREEZE_ATTEMPTS)
        self.frozen: dict[int, _Frozen] = {}

    def start(self) -> float:
        """Wait until every worker is ready, then let them all go at once."""
        for w in self.live.values():
            if not isinstance(self._receive(w), Ready):
                raise DemoError(f"worker {w.number} did not start")
        started = clock.now()
        for w in self.live.values():
            w.conn.send_bytes(GO)
        return started

    def run(self, deadline: float) -> float:
        """Until every worker is done; the time the last one finished."""
        while self.live:
            if clock.now() > deadline:
                raise DemoError(f"round {self.spec.number} did not finish in {ROUND_LIMIT:.0f}s")
            self._thaw_due()
            ready = wait([w.conn for w in self.live.values()], timeout=self._timeout())
            for w in [w for w in list(self.live.values()) if w.conn in ready]:
                self._handle(w, self._receive(w))
        return clock.now()

    def _receive(self, w: _Worker) -> Message:
        try:
            msg: Message = w.conn.recv()
        except EOFError:
            w.process.join(timeout=1)
            raise DemoError(
                f"worker {w.number} exited unexpectedly (exit code {w.process.exitcode})"
            ) from None
        return msg

    def _timeout(self) -> float:
        dues = [f.due for f in self.frozen.values()]
        return max(min(dues) - clock.now(), 0.005) if dues else 0.25

    def _handle(self, w: _Worker, msg: Message) -> None:
        if isinstance(msg, Acquired):
            self.recorder.acquired(msg)
        elif isinstance(msg, Intent):
            self._on_intent(w, msg)
        elif isinstance(msg, Wrote):
            self._on_wrote(msg)
        elif isinstance(msg, Released):
            self._on_released(msg)
        elif isinstance(msg, Done):
            del self.live[w.number]
        elif isinstance(msg, Failed):
            raise DemoError(f"worker {msg.worker} failed: {msg.message}")

    def _on_intent(self, w: _Worker, msg: Intent) -> None:
        if not self.plan.should_pause(bool(self.frozen)):
            w.conn.send_bytes(GO)
            return
        if not self.pauser.freeze(w.pid):
            raise DemoError(f"could not freeze worker pid {w.pid} outside a lock transaction")
        since = clock.now()
        self.frozen[w.number] = _Frozen(w, msg, since, since + PAUSE_TTLS * self.options.ttl)
        self.reporter.note(
            f"worker {w.number} frozen (SIGSTOP) holding token {msg.token}, "
            f"about to sell seat {msg.seat}",
            "pause",
        )

    def _thaw_due(self) -> None:
        now = clock.now()
        for number, f in list(self.frozen.items()):
            resold = self.recorder.resold_since(f.intent.seat, f.since)
            if now < f.due or not (resold or now > f.since + MAX_PAUSE_TTLS * self.options.ttl):
                continue
            f.worker.conn.send_bytes(GO)
            resume(f.worker.pid)
            end = clock.now()
            del self.frozen[number]
            self.recorder.paused(WorkerPause(number, f.since, end, f.intent.token, f.intent.seat))
            self.reporter.note(f"worker {number} resumed after {end - f.since:.2f}s", "resume")

    def _on_wrote(self, msg: Wrote) -> None:
        self.recorder.wrote(msg)
        self.reporter.progress(self.recorder.sold())
        if msg.outcome == "double":
            self.reporter.note(
                f"worker {msg.worker} sold seat {msg.seat} again with stale token "
                f"{msg.token}: seat sold twice",
                "double",
            )
        elif msg.outcome == "rejected":
            self.reporter.note(
                f"worker {msg.worker}'s stale write of seat {msg.seat} (token {msg.token}) "
                "rejected by the fence",
                "rejected",
            )

    def _on_released(self, msg: Released) -> None:
        self.recorder.released(msg)
        if msg.lost:
            self.reporter.note(
                f"worker {msg.worker} noticed its lease (token {msg.token}) had been lost", "lost"
            )


def _fresh_lock_database(spec: RoundSpec) -> None:
    spec.directory.mkdir(parents=True, exist_ok=True)
    remove_database(spec.locks_path)
    fencelock.connect(spec.locks_url).close()  # creates the schema


def run_round(spec: RoundSpec, options: Options, reporter: Reporter) -> RoundResult:
    """Play one round on a fresh shop; its counts and trace."""
    _fresh_lock_database(spec)
    shop.create(spec.shop_path, options.seats)
    reporter.round_started(spec, options.seats)
    workers = _start_workers(spec, options)
    conductor = Conductor(spec, options, workers, reporter)
    finished = False
    try:
        started = conductor.start()
        ended = conductor.run(clock.now() + ROUND_LIMIT)
        finished = True
    finally:
        conductor.pauser.close()
        _stop_workers(workers, finished)
    return _result(spec, options, conductor.recorder, started, ended)


def _result(
    spec: RoundSpec, options: Options, rec: Recorder, started: float, ended: float
) -> RoundResult:
    tally = shop.tally(spec.shop_path)
    stats = (
        ("seats sold", tally.seats_sold),
        ("sold twice", tally.sold_twice),
        ("stale writes rejected", rec.count("rejected")),
        ("pauses", len(rec.pauses)),
        ("leases lost", rec.leases_lost),
    )
    return RoundResult(
        number=spec.number,
        title=spec.title,
        fenced=spec.fenced,
        seats=options.seats,
        seats_sold=tally.seats_sold,
        sales=tally.sales,
        sold_twice=tally.sold_twice,
        stale_rejected=rec.count("rejected"),
        pauses=len(rec.pauses),
        leases_lost=rec.leases_lost,
        seconds=ended - started,
        trace=rec.trace(
            f"Round {spec.number}: {spec.title}", _NOTES[spec.fenced], started, ended, stats
        ),
    )
