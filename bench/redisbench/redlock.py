"""Scenarios 3-4: Redlock over 5 nodes, all up, then one hung and one killed."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.metadata
import math
import multiprocessing as mp
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnProcess
from typing import Any

import redis
import redis.asyncio
from harness.lockers import NotAcquired, afencelock_cycle, fencelock_cycle
from harness.rounds import atimed, timed
from harness.stats import median, summary_ms
from harness.workers import READY_TIMEOUT
from redis.backoff import NoBackoff
from redis.retry import Retry

import fencelock
from fencelock import clock
from redisbench.common import (
    BATCH,
    CLOSE_GRACE,
    GRACE,
    HUNG,
    KILLED,
    MAX_REDLOCK_CALLS,
    NODE_TIMEOUT,
    NODES,
    PROGRESS_EVERY,
    REDLOCK_ACQUIRE_TIMEOUT,
    TTL,
    TTL_MS,
    Address,
    AsyncClose,
    AsyncCycle,
    Settings,
    SyncCycle,
    quiet_peer_logs,
    redlock_url,
)
from redisbench.fleet import Fleet, open_sockets


@dataclass(frozen=True)
class RedlockSpec:
    key: str
    label: str
    api: str  # "sync" or "asyncio"
    kind: str  # "fencelock", "aioredlock", "redlock-py" or "pottery"
    peer: str | None  # the peer distribution it needs, if any
    tuned: bool = False  # redis-py peers: 0.1 s socket timeouts and no redis-py retries

    @property
    def tokens(self) -> bool:
        return self.kind == "fencelock"


REDLOCK = [
    RedlockSpec("fencelock", "fencelock redlock:// (tokens)", "sync", "fencelock", None),
    RedlockSpec("fencelock-async", "fencelock redlock:// asyncio (tokens)", "asyncio",
                "fencelock", None),
    RedlockSpec("aioredlock", "aioredlock (lock_timeout=30)", "asyncio", "aioredlock",
                "aioredlock"),
    RedlockSpec("redlock-py", "redlock-py (defaults)", "sync", "redlock-py", "redlock-py"),
    RedlockSpec("redlock-py-tuned", "redlock-py (0.1 s timeouts, no retries)", "sync",
                "redlock-py", "redlock-py", tuned=True),
    RedlockSpec("pottery", "pottery Redlock (defaults)", "sync", "pottery", "pottery"),
    RedlockSpec("pottery-tuned", "pottery Redlock (0.1 s timeouts, no retries)", "sync",
                "pottery", "pottery", tuned=True),
]  # fmt: skip


def peer_redis_kwargs(tuned: bool) -> dict[str, Any]:
    """redis-py client options of a peer: its defaults, or bounded like fencelock's nodes."""
    if not tuned:
        return {}
    return {
        "socket_timeout": NODE_TIMEOUT,
        "socket_connect_timeout": NODE_TIMEOUT,
        "retry": Retry(NoBackoff(), 0),
    }


def build_sync(
    spec: RedlockSpec, nodes: Sequence[Address], name: str
) -> tuple[SyncCycle, Callable[[], Any]]:
    """One acquire+release of a blocking Redlock, and how to close its clients."""
    if spec.kind == "fencelock":
        client = fencelock.connect(redlock_url(nodes))
        lock = client.lock(name, ttl=TTL, renew=True)
        return fencelock_cycle(lock, REDLOCK_ACQUIRE_TIMEOUT), client.close
    if spec.kind == "redlock-py":
        module: Any = importlib.import_module("redlock")
        extra = peer_redis_kwargs(spec.tuned)
        manager = module.Redlock([{"host": h, "port": p, **extra} for h, p in nodes])

        def redlock_py_cycle() -> int:
            held = manager.lock(name, TTL_MS)
            if held is False:
                raise NotAcquired("redlock-py lock() returned False")
            manager.unlock(held)
            return -1

        def redlock_py_close() -> None:
            for server in manager.servers:
                server.close()

        return redlock_py_cycle, redlock_py_close
    if spec.kind == "pottery":
        module = importlib.import_module("pottery")
        masters = [redis.Redis(host=h, port=p, **peer_redis_kwargs(spec.tuned)) for h, p in nodes]
        redlock = module.Redlock(key=name, masters=set(masters), auto_release_time=TTL)

        def pottery_cycle() -> int:
            if not redlock.acquire(timeout=REDLOCK_ACQUIRE_TIMEOUT):
                raise NotAcquired(f"pottery acquire() gave up after {REDLOCK_ACQUIRE_TIMEOUT:g} s")
            redlock.release()
            return -1

        def pottery_close() -> None:
            for master in masters:
                master.close()

        return pottery_cycle, pottery_close
    raise ValueError(f"no blocking Redlock called {spec.kind!r}")


async def build_async(
    spec: RedlockSpec, nodes: Sequence[Address], name: str
) -> tuple[AsyncCycle, AsyncClose]:
    """One acquire+release of an asyncio Redlock, and how to close its clients."""
    if spec.kind == "fencelock":
        client = fencelock.aconnect(redlock_url(nodes))
        lock = client.lock(name, ttl=TTL, renew=True)
        return afencelock_cycle(lock, REDLOCK_ACQUIRE_TIMEOUT), client.aclose
    if spec.kind == "aioredlock":
        module: Any = importlib.import_module("aioredlock")
        manager = module.Aioredlock([{"host": h, "port": p} for h, p in nodes])

        async def aioredlock_cycle() -> int:
            held = await manager.lock(name, lock_timeout=TTL)
            await manager.unlock(held)
            return -1

        return aioredlock_cycle, manager.destroy
    raise ValueError(f"no asyncio Redlock called {spec.kind!r}")


class Probe:
    """A Redlock row's tally, sent to the parent by its own thread every PROGRESS_EVERY s.

    The thread keeps reporting while the main thread is stuck in a call, so a row the
    parent kills still has its counts. Messages to the parent: ("ready", counts), then
    per round ("progress", tally)... ("done", tally with the round's totals), and at the
    end ("closed", None); ("crash", traceback) on an exception. From the parent:
    ("go", seconds) for each round, then "stop".
    """

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._guard = threading.Lock()
        self.calls: list[tuple[float, bool]] = []  # (duration, acquired and released)
        self._sent = 0
        self.errors: dict[str, int] = {}
        self.first_error: str | None = None
        self.last_token = -1
        self.inversions = 0
        self.in_call_since: float | None = None
        self._round_started = math.nan
        self._round_first = 0  # index in calls of this round's first call
        self._active = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._report, name="bench-probe", daemon=True)

    def fileno(self) -> int:
        return self._conn.fileno()

    def counts(self) -> dict[str, int]:
        """Threads (less this probe's own) and open sockets (less the pipe to the parent)."""
        probe = 1 if self._thread.is_alive() else 0
        return {
            "threads": threading.active_count() - probe,
            "sockets": open_sockets(exclude=self._conn.fileno()),
        }

    def send(self, kind: str, payload: Any) -> None:
        with self._guard:
            self._send(kind, payload)

    def _send(self, kind: str, payload: Any) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._conn.send((kind, payload))

    def ready(self) -> None:
        self.send("ready", self.counts())

    def command(self, timeout: float = READY_TIMEOUT * 4) -> float | None:
        """Seconds to run the next round for, or None: "stop" (or the parent is gone)."""
        try:
            if not self._conn.poll(timeout):
                return None
            command = self._conn.recv()
        except (EOFError, OSError):
            return None
        if isinstance(command, tuple) and command[0] == "go":
            return float(command[1])
        return None

    def start_round(self) -> None:
        with self._guard:
            self._round_started = clock.now()
            self._round_first = len(self.calls)
            self._active = True
        if not self._thread.is_alive():
            self._thread.start()

    def record(self, started: float, token: int | None, error: BaseException | None) -> None:
        ended = clock.now()
        self.calls.append((ended - started, error is None))
        if error is not None:
            kind = type(error).__name__
            self.errors[kind] = self.errors.get(kind, 0) + 1
            self.first_error = self.first_error or f"{kind}: {error}"
        elif token is not None and token >= 0:
            self.inversions += token <= self.last_token
            self.last_token = token

    def next_call(self, end: float) -> float | None:
        """The start of the next call, or None: the round is over (or the calls capped)."""
        if len(self.calls) >= MAX_REDLOCK_CALLS:
            return None
        started = self.in_call_since = clock.now()
        return None if started >= end else started

    def call_done(self, started: float, token: int | None, error: BaseException | None) -> bool:
        """Record a call; True when it failed at once (the caller pauses: no hot loop)."""
        self.record(started, token, error)
        self.in_call_since = None
        return error is not None and clock.now() - started < 0.001

    def _tally(self) -> dict[str, Any]:
        end = len(self.calls)
        chunk, self._sent = self.calls[self._sent : end], end
        return {
            "calls": chunk,
            "errors": dict(self.errors),
            "first_error": self.first_error,
            "inversions": self.inversions,
            "in_call_since": self.in_call_since,
            **self.counts(),
        }

    def _report(self) -> None:
        while not self._stop.wait(PROGRESS_EVERY):
            with self._guard:  # tally and send in one step: messages leave in order
                if self._active:
                    self._send("progress", self._tally())

    def end_round(self) -> None:
        with self._guard:
            self._active = False
            calls = self.calls[self._round_first :]
            tally = self._tally()
            tally["round"] = {
                "completed": sum(1 for _, ok in calls if ok),
                "failed": sum(1 for _, ok in calls if not ok),
                "elapsed": clock.now() - self._round_started,
            }
            self._send("done", tally)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(PROGRESS_EVERY * 4)


def redlock_worker(spec: RedlockSpec, nodes: list[Address], name: str, conn: Connection) -> None:
    """One Redlock row in its own process: warm up, say ready, run each round it is sent."""
    quiet_peer_logs()
    probe = Probe(conn)
    try:
        if spec.api == "asyncio":
            asyncio.run(redlock_async_main(spec, nodes, name, probe))
        else:
            redlock_sync_main(spec, nodes, name, probe)
    except BaseException:
        probe.send("crash", traceback.format_exc(limit=6))
    finally:
        conn.close()


def redlock_sync_main(spec: RedlockSpec, nodes: list[Address], name: str, probe: Probe) -> None:
    cycle, close = build_sync(spec, nodes, name)
    try:
        timed(cycle, 0.2, BATCH)  # warm up with every node up
        probe.ready()
        while (seconds := probe.command()) is not None:
            probe.start_round()
            end = clock.now() + seconds
            while (started := probe.next_call(end)) is not None:
                token: int | None = None
                error: BaseException | None = None
                try:
                    token = cycle()
                except Exception as exc:
                    error = exc
                if probe.call_done(started, token, error):
                    time.sleep(0.001)
            probe.in_call_since = None
            probe.end_round()
    finally:
        probe.stop()
        close()
        probe.send("closed", None)


async def next_command(probe: Probe) -> float | None:
    """:meth:`Probe.command` without blocking the event loop (no thread either: the thread
    count is one of the measurements) while the other rows run their rounds."""
    loop = asyncio.get_running_loop()
    readable: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not readable.done():
            readable.set_result(None)

    loop.add_reader(probe.fileno(), wake)
    try:
        await asyncio.wait_for(readable, READY_TIMEOUT * 4)
    except asyncio.TimeoutError:
        return None
    finally:
        loop.remove_reader(probe.fileno())
    return probe.command(timeout=READY_TIMEOUT)


async def redlock_async_main(
    spec: RedlockSpec, nodes: list[Address], name: str, probe: Probe
) -> None:
    cycle, close = await build_async(spec, nodes, name)
    try:
        await atimed(cycle, 0.2, BATCH)  # warm up with every node up
        probe.ready()
        while (seconds := await next_command(probe)) is not None:
            probe.start_round()
            end = clock.now() + seconds
            while (started := probe.next_call(end)) is not None:
                token: int | None = None
                error: BaseException | None = None
                try:
                    token = await cycle()
                except Exception as exc:
                    error = exc
                if probe.call_done(started, token, error):
                    await asyncio.sleep(0.001)
            probe.in_call_since = None
            probe.end_round()
    finally:
        probe.stop()
        await close()
        probe.send("closed", None)


@dataclass
class RedlockResult:
    key: str
    label: str
    api: str
    tokens: bool
    degraded: bool
    outcome: str  # "ok", "hung", "crashed", "no start"
    rounds_cycles_per_second: list[float]
    cycles_per_second: float  # median round
    elapsed: float  # timed seconds, all rounds
    completed: int  # acquired and released
    failed: int
    latency_ms: dict[str, float | int]  # of the calls that acquired and released
    failed_latency_ms: dict[str, float | int]
    threads_before: int | None
    threads_after: int | None
    sockets_before: int | None
    sockets_after: int | None
    stuck_for: float | None  # a call still running when the row was killed, for this long
    closed: bool  # the client's close() returned in time
    errors: dict[str, int]
    first_error: str | None
    token_inversions: int


class RedlockRow:
    """One Redlock row's process, driven round by round from here."""

    def __init__(self, spec: RedlockSpec, fleet: Fleet, degraded: bool) -> None:
        self.spec, self.degraded = spec, degraded
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        name = f"bench/redlock/{'degraded' if degraded else 'up'}/{spec.key}"
        self.proc: SpawnProcess = ctx.Process(
            target=redlock_worker,
            args=(spec, fleet.node_addresses, name, child),
            name=f"bench-{spec.key}",
            daemon=True,
        )
        self.state: dict[str, Any] = {
            "calls": [], "rounds": [], "outcome": "no start", "closed": False, "stuck_for": None,
        }  # fmt: skip
        self.proc.start()
        child.close()

    @property
    def running(self) -> bool:
        return self.state["outcome"] in ("ready", "ok")

    def wait_ready(self) -> bool:
        if receive(self.conn, self.proc, clock.now() + READY_TIMEOUT, self.state, until="ready"):
            self.state["outcome"] = "ready"
        return self.running

    def run_round(self, seconds: float) -> None:
        """One timed round; a row still in a call GRACE s after its end is killed."""
        first = len(self.state["calls"])
        go_at = clock.now()
        with contextlib.suppress(OSError):
            self.conn.send(("go", seconds))
        self.state["outcome"] = "hung"
        if receive(self.conn, self.proc, go_at + seconds + GRACE, self.state, until="done"):
            self.state["outcome"] = "ok"
            self.state["rounds"].append(self.state["last"]["round"])
            return
        stopped_at = clock.now()
        self.proc.kill()
        calls = self.state["calls"][first:]
        self.state["rounds"].append(
            {
                "completed": sum(1 for _, ok in calls if ok),
                "failed": sum(1 for _, ok in calls if not ok),
                "elapsed": stopped_at - go_at,
            }
        )
        in_call_since = self.state.get("last", {}).get("in_call_since")
        if self.state["outcome"] == "hung" and in_call_since is not None:
            self.state["stuck_for"] = stopped_at - in_call_since  # one clock for both

    def finish(self) -> RedlockResult:
        """Stop the row (let its client close, briefly), leave nothing running."""
        try:
            if self.state["outcome"] in ("ready", "ok") and self.proc.is_alive():
                with contextlib.suppress(OSError):
                    self.conn.send("stop")
                receive(self.conn, self.proc, clock.now() + CLOSE_GRACE, self.state, "closed")
        finally:
            if self.proc.is_alive():
                self.proc.kill()
            self.proc.join(5)
            self.conn.close()
        return redlock_result(self.spec, self.degraded, self.state)


def receive(
    conn: Connection, proc: SpawnProcess, deadline: float, state: dict[str, Any], until: str
) -> bool:
    """Fold the row's messages into ``state`` until message ``until`` (True) or deadline."""
    while True:
        remaining = deadline - clock.now()
        if remaining <= 0:
            return False
        try:
            if not conn.poll(min(remaining, 0.1)):
                if not proc.is_alive() and not conn.poll(0):
                    if state["outcome"] not in ("ok", "ready"):
                        state["outcome"] = "crashed"
                    return False
                continue
            kind, payload = conn.recv()
        except (EOFError, OSError):
            if state["outcome"] not in ("ok", "ready"):
                state["outcome"] = "crashed"
            return False
        if kind == "ready":
            state["before"] = payload
        elif kind in ("progress", "done"):
            state["calls"].extend(payload.pop("calls"))
            state["last"] = payload
        elif kind == "closed":
            state["closed"] = True
        elif kind == "crash":
            state["outcome"] = "crashed"
            state["crash"] = payload
        if kind == until:
            return True


def redlock_result(spec: RedlockSpec, degraded: bool, state: dict[str, Any]) -> RedlockResult:
    calls: list[tuple[float, bool]] = state["calls"]
    last: dict[str, Any] = state.get("last", {})
    before: dict[str, int] = state.get("before", {})
    rounds: list[dict[str, Any]] = state["rounds"]
    rates = [r["completed"] / r["elapsed"] for r in rounds if r["elapsed"] > 0]
    first_error = last.get("first_error")
    if state.get("crash"):
        first_error = state["crash"].strip().splitlines()[-1]
    return RedlockResult(
        key=spec.key,
        label=spec.label,
        api=spec.api,
        tokens=spec.tokens,
        degraded=degraded,
        outcome=state["outcome"],
        rounds_cycles_per_second=rates,
        cycles_per_second=median(rates),
        elapsed=sum(r["elapsed"] for r in rounds),
        completed=sum(1 for _, ok in calls if ok),
        failed=sum(1 for _, ok in calls if not ok),
        latency_ms=summary_ms([d for d, ok in calls if ok]),
        failed_latency_ms=summary_ms([d for d, ok in calls if not ok]),
        threads_before=before.get("threads"),
        threads_after=last.get("threads"),
        sockets_before=before.get("sockets"),
        sockets_after=last.get("sockets"),
        stuck_for=state["stuck_for"],
        closed=bool(state["closed"]),
        errors=dict(last.get("errors", {})),
        first_error=first_error,
        token_inversions=int(last.get("inversions", 0)),
    )


def redlock_specs(versions: dict[str, str | None]) -> list[RedlockSpec]:
    return [s for s in REDLOCK if s.peer is None or versions.get(s.peer) is not None]


def measure_redlock_up(
    fleet: Fleet, settings: Settings, versions: dict[str, str | None]
) -> list[RedlockResult]:
    """Every row's process at once, then interleaved rounds (each row once per round)."""
    window = settings.redlock_seconds / settings.redlock_rounds
    print(
        f"redlock, {NODES} nodes up: {settings.redlock_rounds} rounds x {window:g} s per lock ...",
        file=sys.stderr,
    )
    rows = [RedlockRow(spec, fleet, degraded=False) for spec in redlock_specs(versions)]
    try:
        for row in rows:
            row.wait_ready()
        for _ in range(settings.redlock_rounds):
            for row in rows:
                if row.running:
                    row.run_round(window)
    finally:
        results = [row.finish() for row in rows]
    return results


def measure_redlock_degraded(
    fleet: Fleet, settings: Settings, versions: dict[str, str | None]
) -> list[RedlockResult]:
    """One row at a time: warm up with all nodes up, fault two nodes, run, heal."""
    results = []
    for spec in redlock_specs(versions):
        print(
            f"redlock, node {HUNG} hung + node {KILLED} killed: {spec.label}, "
            f"{settings.redlock_seconds:g} s ...",
            file=sys.stderr,
        )
        row = RedlockRow(spec, fleet, degraded=True)
        faulted = False
        try:
            if row.wait_ready():
                fleet.fault()
                faulted = True
                row.run_round(settings.redlock_seconds)
        finally:
            results.append(row.finish())
            if faulted:
                fleet.heal()
    return results
