"""Uncontended rounds: time a cycle (wall and CPU), and run contenders in interleaved rounds.

A wall-clock rate on a shared machine drifts by tens of percent within minutes, so every
comparison takes its contenders in turn (A, B, C, A, B, C, ...) on the same servers and
reads the median round: the drift moves every contender alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from harness.stats import median

SyncCycle = Callable[[], object]
AsyncCycle = Callable[[], Awaitable[object]]
Closer = Callable[[], object]
AsyncCloser = Callable[[], Awaitable[object]]
MAX_CYCLES = 2_000_000  # a round stops here whatever its length


@dataclass(frozen=True)
class Sample:
    """One timed run of a cycle: how many, in what wall time and process CPU (seconds)."""

    cycles: int
    wall: float
    cpu: float

    @property
    def rate(self) -> float:
        return self.cycles / self.wall if self.wall > 0 else math.nan

    @property
    def cpu_us(self) -> float:
        return self.cpu / self.cycles * 1e6 if self.cycles else math.nan

    @property
    def wall_us(self) -> float:
        return self.wall / self.cycles * 1e6 if self.cycles else math.nan


def timed(cycle: SyncCycle, seconds: float, batch: int = 20, limit: int = MAX_CYCLES) -> Sample:
    """Run ``cycle`` in batches until ``seconds`` pass (at least one batch, at most ``limit``
    cycles). The clocks are read once a batch; CPU is the process's, every thread."""
    cpu, start = time.process_time(), time.perf_counter()
    deadline, done = start + seconds, 0
    while done < limit:
        for _ in range(batch):
            cycle()
        done += batch
        if time.perf_counter() >= deadline:
            break
    return Sample(done, time.perf_counter() - start, time.process_time() - cpu)


async def atimed(
    cycle: AsyncCycle, seconds: float, batch: int = 20, limit: int = MAX_CYCLES
) -> Sample:
    """:func:`timed` for a coroutine function."""
    cpu, start = time.process_time(), time.perf_counter()
    deadline, done = start + seconds, 0
    while done < limit:
        for _ in range(batch):
            await cycle()
        done += batch
        if time.perf_counter() >= deadline:
            break
    return Sample(done, time.perf_counter() - start, time.process_time() - cpu)


class Runner(Protocol):
    """A contender kept open for every round."""

    def timed(self, seconds: float, batch: int) -> Sample: ...

    def close(self) -> None: ...


class SyncRunner:
    def __init__(self, cycle: SyncCycle, closer: Closer = lambda: None) -> None:
        self._cycle, self._closer = cycle, closer

    def timed(self, seconds: float, batch: int) -> Sample:
        return timed(self._cycle, seconds, batch)

    def close(self) -> None:
        self._closer()


class AsyncRunner:
    """An asyncio contender on an event loop of its own, kept for every round."""

    def __init__(
        self, setup: Callable[[], Coroutine[Any, Any, tuple[AsyncCycle, AsyncCloser]]]
    ) -> None:
        self._loop = asyncio.new_event_loop()
        try:
            self._cycle, self._closer = self._loop.run_until_complete(setup())
        except BaseException:
            self._loop.close()
            raise

    def timed(self, seconds: float, batch: int) -> Sample:
        return self._loop.run_until_complete(atimed(self._cycle, seconds, batch))

    def close(self) -> None:
        try:
            self._loop.run_until_complete(self._closer())
        finally:
            self._loop.close()


@dataclass
class RateResult:
    """One contender's rounds: cycles/s, CPU and server CPU µs a cycle, one entry a round.

    ``group`` is what its ratio is taken within (an API, a database, a backend)."""

    key: str
    label: str
    group: str = ""
    rates: list[float] = field(default_factory=list)
    cpu_us: list[float] = field(default_factory=list)
    server_us: list[float] = field(default_factory=list)
    cycles: int = 0
    error: str | None = None

    @property
    def rate(self) -> float:
        return median(self.rates)

    @property
    def micros(self) -> float:
        return 1e6 / self.rate if self.rates else math.nan

    @property
    def wall_us(self) -> list[float]:
        return [1e6 / rate for rate in self.rates if rate]

    def add(self, sample: Sample, server_us: float = math.nan) -> None:
        self.rates.append(sample.rate)
        self.cpu_us.append(sample.cpu_us)
        self.server_us.append(server_us)
        self.cycles += sample.cycles


Opener = Callable[[], Runner]


def interleave(
    sides: Sequence[tuple[RateResult, Opener]],
    rounds: int,
    seconds: float,
    warmup: float = 0.2,
    batch: int = 20,
    server_cpu: Callable[[], float] | None = None,
    catch: bool = False,
) -> list[RateResult]:
    """Open every side, warm each up, then ``rounds`` rounds taking the sides in turn.

    ``server_cpu`` (seconds so far) also gives each round the server's CPU a cycle.
    ``catch``: a side that raises keeps the error and sits out the rounds left; else it
    propagates. Every opened side is closed on the way out."""
    opened: list[tuple[RateResult, Runner]] = []
    try:
        for result, opener in sides:
            try:
                runner = opener()
                opened.append((result, runner))
                runner.timed(warmup, 1)  # connections, scripts, schema, renewer threads
            except Exception as exc:
                if not catch:
                    raise
                result.error = f"{type(exc).__name__}: {exc}"
        for _ in range(rounds):
            for result, runner in opened:
                if result.error:
                    continue
                try:
                    before = server_cpu() if server_cpu else math.nan
                    sample = runner.timed(seconds, batch)
                    after = server_cpu() if server_cpu else math.nan
                except Exception as exc:
                    if not catch:
                        raise
                    result.error = f"{type(exc).__name__}: {exc}"
                    continue
                result.add(sample, (after - before) / sample.cycles * 1e6)
    finally:
        for _result, runner in opened:
            with contextlib.suppress(Exception):
                runner.close()
    return [result for result, _opener in sides]
