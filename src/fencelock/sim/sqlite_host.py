"""The real embedded SQLite backend on one real file, under simulated hosts.

``python -m fencelock.sim --family sqlite --seed N`` (or ``python -m
fencelock.sim.sqlite_host --seed N``). Each client is a process on a simulated machine:
a :class:`SimHost` (liveness's ``Host`` seam) gives its backend instance its boot id,
PID and time namespaces, whether its /proc is its PID namespace's, the process table
that /proc shows and its ``CLOCK_BOOTTIME`` (the machine's rate, its uptime, the time
namespace's offset). Machines share the file as hosts sharing a volume would. The seed
decides everything: the machines, containers and time namespaces, what each client does
(tries with timeout 0 or polls a while with its attempt queued, holds, renews at a
third of its TTL, releases) and the faults: a process that vanishes, one whose PID
another process takes, a paused holder, a wall-clock step (moving btime), a reboot
(new boot id, every process gone), a client restarted in another container or time
namespace. Time is the world's, advanced from event to event.

Invariants, after every event: no two live clients each trusting the lease (acquired,
not lost, its own clock short of :func:`~fencelock.engine.timing.trusted_until`);
tokens grow; a dead holder's lease is free to a try that can prove the death (same
boot, PID and time namespace, both /procs their namespace's) at once, else to one on
the row's clock once its expiry passed, else once a process on the trier's clock has
seen it unchanged for the TTL on that clock (:data:`SLACK` more).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import dataclasses
import hashlib
import heapq
import os
import random
import sqlite3
import sys
import tempfile
import time
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from fencelock.backends.base import Acquired
from fencelock.backends.sqlite import SQLiteBackend, liveness
from fencelock.backends.sqlite.backend import SQLiteAttempt
from fencelock.engine.timing import trusted_until
from fencelock.engine.urls import parse_url
from fencelock.sim import sqlite_guess
from fencelock.sim.bugs import reintroduced
from fencelock.sim.run_options import add_run_options
from fencelock.sim.world import check_run

NAME = "jobs/sim"
HZ = sqlite_guess.HZ
ROOT_PIDNS = "pid:[4026531836]"  # the same inode on every Linux host and boot
ROOT_TIMENS = "time:[4026531834]"
SLACK = 0.01  # seconds past a bound before a lease still held is a violation
RATE_SPREAD = 0.004  # each machine's clock rate within 1 +- this (drift allowance: 1 %)
SYSTEM_PIDS = 40  # processes every boot starts with, PIDs 1..40 in each table
EPOCH = 1_800_000_000.0  # the wall clock when the world's time is 0
_SEPARATOR = "\x1f"  # fencelock.holder's, between an owner description's fields


@dataclass(frozen=True)
class SqlitePlan:
    """What a run does, all of it from ``seed``."""

    seed: int
    clients: int = 4
    duration: float = 30.0  # the world's seconds
    ttl: float = 1.0
    bugs: tuple[str, ...] = ()
    faults: bool = True

    def __post_init__(self) -> None:
        check_run(self.clients, self.ttl, self.duration, self.bugs)


@dataclass
class SqliteOutcome:
    """How a run ended."""

    plan: SqlitePlan
    violation: str | None
    trace: list[str]
    steps: int
    grants: int
    virtual_seconds: float
    cpu_seconds: float
    digest: str
    freed: Counter[str]  # dead holders' leases taken: proven, expired, observed
    faults: Counter[str]

    @property
    def ok(self) -> bool:
        return self.violation is None


class Violation(AssertionError):
    """An invariant failed."""


@dataclass
class Machine:
    """A host: its boot, clock, process tables and namespaces (made anew at each boot)."""

    name: str
    rate: float  # CLOCK_BOOTTIME seconds per second of the world's time
    containers: int  # PID namespaces besides the root one, each boot
    shifted: list[float]  # the offsets of the time namespaces besides the root one
    boots: int = 0
    boot: str = ""
    booted: float = 0.0  # the world's time of this boot
    uptime: float = 0.0  # CLOCK_BOOTTIME at ``booted``
    btime: float = 0.0  # /proc/stat's btime: the wall clock at boot, moved by steps
    pidns: list[str] = field(default_factory=list)  # [root, container 1, ...]
    timens: list[str] = field(default_factory=list)  # [root, shifted 1, ...]
    offsets: dict[str, float] = field(default_factory=dict)  # timens -> offset
    tables: dict[str, dict[int, int]] = field(default_factory=dict)  # pidns -> PID -> ticks
    next_pid: dict[str, int] = field(default_factory=dict)

    def clock(self, t: float, timens: str) -> float:
        """CLOCK_BOOTTIME in ``timens`` at the world's time ``t``."""
        return self.uptime + (t - self.booted) * self.rate + self.offsets[timens]

    def ticks(self, t: float) -> int:
        """Clock ticks since boot, as the root time namespace's /proc shows them."""
        return int(self.clock(t, ROOT_TIMENS) * HZ)


@dataclass(frozen=True)
class Slot:
    """Where a client's process runs: machine, container (0: none), time namespace
    (0: the root one), and whether its /proc is its PID namespace's."""

    machine: int
    container: int
    timens: int
    proc_ok: bool


@dataclass
class Proc:
    """A process: its PID in its namespace and in the root one, its start in ticks."""

    machine: Machine
    boot: str
    pidns: str
    pid: int
    root_pid: int
    timens: str
    proc_ok: bool
    ticks: int

    def clock(self, t: float) -> float:
        return self.machine.clock(t, self.timens)

    @property
    def clock_key(self) -> tuple[str, str]:
        return self.boot, self.timens


class SimHost:
    """One process's view of its simulated host (a ``liveness.Host``)."""

    def __init__(self, world: SqliteWorld, proc: Proc) -> None:
        self._world, self._proc = world, proc

    def boot_id(self) -> str | None:
        return self._proc.boot

    def pid_namespace(self) -> str | None:
        return self._proc.pidns

    def time_namespace(self) -> str | None:
        return self._proc.timens

    def proc_matches(self) -> bool:
        return self._proc.proc_ok

    def pid(self) -> int:
        return self._proc.pid

    def process(self, pid: int) -> liveness.Process:
        """What this process's /proc shows: its namespace's table, or the root one's,
        the start ticks moved by its time namespace's offset."""
        proc = self._proc
        table = proc.machine.tables[proc.pidns if proc.proc_ok else proc.machine.pidns[0]]
        ticks = table.get(pid)
        if ticks is None:
            return liveness.GONE
        return ticks + int(proc.machine.offsets[proc.timens] * HZ)

    def now(self) -> float:
        return self._proc.clock(self._world.t)

    def exit_notice(self, pid: int, start_ticks: int) -> int | None:
        return None

    def btime(self) -> float:
        return self._proc.machine.btime


@dataclass
class Client:
    """One simulated process after another in a slot, and what it believes."""

    number: int
    slot: Slot
    proc: Proc | None = None
    backend: SQLiteBackend | None = None
    description: str = ""
    state: str = "dead"  # dead, idle, waiting, holding
    owner: str | None = None
    trusted: float = 0.0  # on its own clock
    lost: bool = False
    attempt: SQLiteAttempt | None = None
    wait_end: float = 0.0
    hold_end: float = 0.0
    paused_until: float = 0.0

    def believes(self, t: float) -> bool:
        """Whether it acts as the holder at the world's time ``t``."""
        return (
            self.state == "holding"
            and not self.lost
            and self.proc is not None
            and self.proc.clock(t) < self.trusted
        )


@dataclass
class Death:
    """A holder that died still owning the row, and who has seen its row since."""

    owner: str
    at: float
    proc: Proc
    expires_at: float  # the row's, on the holder's clock
    sighted: dict[tuple[str, str], float] = field(default_factory=dict)  # clock -> first try


class SqliteWorld:
    """One run: machines, clients, the file, the checks."""

    def __init__(self, plan: SqlitePlan, directory: str) -> None:
        self.plan, self.rng = plan, random.Random(plan.seed)
        self.t = 0.0
        self.path = str(Path(directory) / "locks.db")
        self.url = f"sqlite:///{self.path}"
        self.trace: deque[str] = deque(maxlen=40)
        self.whole = hashlib.sha256()
        self.steps = self.grants = 0
        self.last_token = 0
        self.death: Death | None = None
        self.violation: str | None = None
        self.freed: Counter[str] = Counter()  # how dead holders' leases were taken
        self.faults: Counter[str] = Counter()
        self.machines = [self._machine(i) for i in range(self.rng.choice((1, 2, 2, 3)))]
        for machine in self.machines:
            self._boot(machine, uptime=self.rng.uniform(100.0, 100_000.0))
        self.clients = [Client(i, self._slot()) for i in range(plan.clients)]
        self.due: list[tuple[float, int, int]] = []  # (when, order, client or -1: faults)
        self._order = 0
        self.file = sqlite3.connect(self.path, isolation_level=None)

    # -- the hosts ----------------------------------------------------------------------

    def _machine(self, number: int) -> Machine:
        rng = self.rng
        offsets = [
            rng.choice((-3600.0, -1000.0, 1000.0, 86400.0)) for _ in range(rng.randint(0, 2))
        ]
        return Machine(
            name=f"host{number}",
            rate=1.0 + rng.uniform(-RATE_SPREAD, RATE_SPREAD),
            containers=rng.randint(0, 2),
            shifted=offsets,
        )

    def _boot(self, machine: Machine, uptime: float) -> None:
        """A new boot: new id and namespaces, only the system's processes."""
        machine.boots += 1
        machine.boot = f"{self.rng.getrandbits(128):032x}"
        machine.booted, machine.uptime = self.t, uptime
        machine.btime = float(int(EPOCH + self.t - uptime))

        def inode() -> str:
            return f"{4026532000 + self.rng.randrange(900)}"

        machine.pidns = [ROOT_PIDNS] + [f"pid:[{inode()}]" for _ in range(machine.containers)]
        machine.timens = [ROOT_TIMENS] + [f"time:[{inode()}]" for _ in machine.shifted]
        machine.offsets = dict(zip(machine.timens, [0.0, *machine.shifted], strict=True))
        machine.tables = {ns: {} for ns in machine.pidns}
        for ns in machine.pidns:
            for pid in range(1, SYSTEM_PIDS + 1):
                machine.tables[ns][pid] = self.rng.randrange(1, max(2, machine.ticks(self.t)))
            machine.next_pid[ns] = SYSTEM_PIDS + 1 + self.rng.randrange(300)
        sqlite_guess.btimes[machine.boot] = lambda: machine.btime

    def _slot(self) -> Slot:
        rng = self.rng
        machine = self.machines[rng.randrange(len(self.machines))]
        container = (
            rng.randint(1, machine.containers) if machine.containers and rng.random() < 0.4 else 0
        )
        timens = (
            rng.randint(1, len(machine.shifted)) if machine.shifted and rng.random() < 0.3 else 0
        )
        proc_ok = container == 0 or rng.random() < 0.7
        return Slot(self.machines.index(machine), container, timens, proc_ok)

    def _spawn(self, slot: Slot) -> Proc:
        """A new process in ``slot``: a fresh PID in its namespace (and in the root one)."""
        machine = self.machines[slot.machine]
        pidns, root = machine.pidns[slot.container], machine.pidns[0]
        ticks = machine.ticks(self.t)
        pid = self._new_pid(machine, pidns)
        root_pid = pid if pidns == root else self._new_pid(machine, root)
        machine.tables[pidns][pid] = machine.tables[root][root_pid] = ticks
        timens = machine.timens[slot.timens]
        return Proc(machine, machine.boot, pidns, pid, root_pid, timens, slot.proc_ok, ticks)

    def _new_pid(self, machine: Machine, pidns: str) -> int:
        pid = machine.next_pid[pidns]
        machine.next_pid[pidns] = pid + 1 + self.rng.randrange(3)
        return pid

    def _vanish(self, proc: Proc, reused: bool) -> None:
        """``proc`` exits; if ``reused``, another process gets its PIDs at once."""
        machine = proc.machine
        if proc.boot != machine.boot:
            return  # its boot is over: its tables went with it
        root = machine.pidns[0]
        for ns, pid in {(proc.pidns, proc.pid), (root, proc.root_pid)}:
            del machine.tables[ns][pid]
            if reused:
                machine.tables[ns][pid] = max(machine.ticks(self.t), proc.ticks + 1)

    # -- the trace and the checks -------------------------------------------------------

    def say(self, text: str) -> None:
        line = f"{self.t:9.4f} {text}"
        self.trace.append(line)
        self.whole.update(line.encode() + b"\n")

    def violated(self, what: str) -> NoReturn:
        self.violation = f"at {self.t:.4f}: {what}"
        self.say(f"VIOLATION: {what}")
        raise Violation(what)

    def _row(self) -> tuple[str | None, float, int] | None:
        found = self.file.execute(
            "SELECT owner, expires_at, token FROM fencelock_leases WHERE name = ?", (NAME,)
        ).fetchone()
        return None if found is None else (found[0], float(found[1]), int(found[2]))

    def check(self) -> None:
        """No two clients trusting the lease at once."""
        believers = [c for c in self.clients if c.believes(self.t)]
        if len(believers) > 1:
            who = ", ".join(
                f"c{c.number} ({_where(c.proc)}; "
                f"trusts {c.trusted - c.proc.clock(self.t):.3f} s more)"
                for c in believers
                if c.proc is not None
            )
            self.violated(f"two clients hold the lease at once: {who}")

    def _must_free(self, client: Client, death: Death) -> str | None:
        """Why ``client``'s try now must find the dead holder's lease free (None: it need not)."""
        proc, dead = client.proc, death.proc
        assert proc is not None
        first = death.sighted.setdefault(proc.clock_key, self.t)
        same = (proc.boot, proc.pidns, proc.timens) == (dead.boot, dead.pidns, dead.timens)
        if same and proc.proc_ok and dead.proc_ok:
            return "its death is proven here"
        now = proc.clock(self.t)
        if proc.clock_key == dead.clock_key:
            expired = now >= death.expires_at + SLACK
            return "it expired on this clock" if expired else None
        if now - proc.clock(first) >= self.plan.ttl + SLACK:
            return f"this clock has seen it unchanged since {first:.4f}"
        return None

    def _how_freed(self, client: Client, death: Death) -> str:
        """How a dead holder's lease came to ``client``: its death proven, its expiry
        on the taker's clock, or its row seen unchanged for its TTL."""
        proc, dead = client.proc, death.proc
        assert proc is not None
        if (proc.boot, proc.pidns, proc.timens, proc.proc_ok, dead.proc_ok) == (
            dead.boot,
            dead.pidns,
            dead.timens,
            True,
            True,
        ):
            return "proven"
        return "expired" if proc.clock_key == dead.clock_key else "observed"

    def _check_freed(self, client: Client, before: tuple[str | None, float, int] | None) -> None:
        """Called after a busy try: was the lease of a dead holder due to this one?"""
        death = self.death
        if death is None or before is None or before[0] != death.owner:
            return
        why = self._must_free(client, death)
        assert client.proc is not None
        key = client.proc.clock_key
        kept = any(
            c is not client and c.attempt is not None and c.proc and c.proc.clock_key == key
            for c in self.clients
        )
        if why is not None and not kept:
            self.violated(
                f"c{client.number} found the lease of a holder dead since "
                f"{death.at:.4f} busy, though {why}"
            )

    # -- the clients --------------------------------------------------------------------

    def _owner(self, client: Client) -> str:
        return f"{self.rng.getrandbits(160):040x}.{client.description}"

    def _describe(self, proc: Proc) -> str:
        """The owner values' description (fencelock.holder): host, PID, start in wall
        seconds (btime plus the ticks this process's /proc shows for its PID)."""
        seen = SimHost(self, proc).process(proc.pid)
        started = "" if not isinstance(seen, int) else f"{proc.machine.btime + seen / HZ:.0f}"
        text = _SEPARATOR.join((proc.machine.name, str(proc.pid), started, "sim"))
        return base64.b32encode(text.encode()).decode().rstrip("=").lower()

    def _start(self, client: Client) -> None:
        if self.rng.random() < 0.2:
            client.slot = self._slot()  # restarted elsewhere: another container, namespace
        proc = self._spawn(client.slot)
        client.proc, client.state, client.lost = proc, "idle", False
        client.backend = SQLiteBackend(parse_url(self.url), host=SimHost(self, proc))
        client.description = self._describe(proc)
        self.say(f"c{client.number} starts: {_where(proc)}")

    def _kill(self, client: Client, reused: bool, why: str) -> None:
        """``client``'s process dies (no release); restarted a while later."""
        if client.proc is None:
            return
        if client.attempt is not None:  # a waiter's queue entry is not what is tested
            client.attempt.close()
            client.attempt = None
        row = self._row()
        holding = client.owner is not None and row is not None and row[0] == client.owner
        if holding and client.owner is not None and row is not None:
            self.death = Death(client.owner, self.t, client.proc, row[1])
        self._vanish(client.proc, reused)
        assert client.backend is not None
        client.backend.close()
        client.proc, client.backend, client.state, client.owner = None, None, "dead", None
        self.say(f"c{client.number} dies ({why}){' owning the row' if holding else ''}")
        self._at(self.t + self.rng.uniform(0.2, 3.0) * self.plan.ttl, client.number)

    def _try(self, client: Client) -> None:
        assert client.proc is not None and client.backend is not None
        if client.attempt is None:
            client.owner = self._owner(client)
            client.attempt = client.backend.attempt(NAME, client.owner, self.plan.ttl)
        before = self._row()
        asked = client.proc.clock(self.t)
        result = client.attempt.try_acquire()
        if isinstance(result, Acquired):
            self._granted(client, result.token, asked)
            return
        self._check_freed(client, before)
        if self.t >= client.wait_end:
            client.attempt.close()
            client.attempt, client.state = None, "idle"
            self._at(self.t + self.rng.uniform(0.05, 1.0) * self.plan.ttl, client.number)
        else:
            client.state = "waiting"
            self._at(self.t + self.rng.uniform(0.02, min(0.3 * self.plan.ttl, 0.9)), client.number)

    def _granted(self, client: Client, token: int, asked: float) -> None:
        assert client.attempt is not None
        client.attempt.close()
        client.attempt = None
        if token <= self.last_token:
            self.violated(f"c{client.number} granted token {token} after {self.last_token}")
        self.last_token, self.grants = token, self.grants + 1
        if self.death is not None:
            self.freed[self._how_freed(client, self.death)] += 1
            self.death = None
        client.state, client.lost = "holding", False
        client.trusted = trusted_until(asked, self.plan.ttl)
        client.hold_end = self.t + self.rng.uniform(0.1, 3.0) * self.plan.ttl
        self.say(f"c{client.number} acquires token {token}")
        self._at(self.t + self.plan.ttl / 3, client.number)

    def _hold(self, client: Client) -> None:
        assert client.proc is not None and client.backend is not None and client.owner
        if self.t < client.paused_until:
            self._at(client.paused_until, client.number)
            return
        asked = client.proc.clock(self.t)
        if asked >= client.trusted:
            client.state, client.lost = "idle", True
            self.say(f"c{client.number} lost its lease: past its trusted time")
        elif self.t >= client.hold_end:
            released = client.backend.release(NAME, client.owner)
            client.state = "idle"
            self.say(f"c{client.number} releases ({'ok' if released else 'not held'})")
        elif client.backend.renew(NAME, client.owner, self.plan.ttl):
            client.trusted = trusted_until(asked, self.plan.ttl)
            self._at(self.t + self.plan.ttl / 3, client.number)
            return
        else:
            client.state, client.lost = "idle", True
            self.say(f"c{client.number} lost its lease: renewal refused")
        self._at(self.t + self.rng.uniform(0.05, 1.0) * self.plan.ttl, client.number)

    def _act(self, client: Client) -> None:
        if client.state == "dead":
            self._start(client)
            self._at(self.t + self.rng.uniform(0.0, 0.5) * self.plan.ttl, client.number)
        elif client.state == "holding":
            self._hold(client)
        else:
            if client.state == "idle":
                patient = self.rng.random() < 0.5
                client.wait_end = self.t + (
                    self.rng.uniform(0.2, 3.0) * self.plan.ttl if patient else 0.0
                )
            self._try(client)

    # -- the faults ---------------------------------------------------------------------

    def _fault(self) -> None:
        rng = self.rng
        alive = [c for c in self.clients if c.proc is not None]
        holders = [c for c in alive if c.state == "holding"]
        kind = rng.choice(("kill", "kill", "reuse", "pause", "pause", "step", "step", "reboot"))
        self.faults[kind] += 1
        victim = rng.choice(holders) if holders and rng.random() < 0.7 else None
        victim = victim or (rng.choice(alive) if alive else None)
        if kind in ("kill", "reuse") and victim is not None:
            self._kill(victim, kind == "reuse", "its PID reused" if kind == "reuse" else "exits")
        elif kind == "pause" and holders:
            paused = rng.choice(holders)
            paused.paused_until = self.t + rng.uniform(0.3, 2.5) * self.plan.ttl
            self.say(f"c{paused.number} paused until {paused.paused_until:.4f}")
        elif kind == "step":
            machine = rng.choice(self.machines)
            step = rng.choice((-60, -5, -2, -1, 1, 2, 5, 60))
            machine.btime += step
            self.say(f"{machine.name}'s wall clock steps {step:+d} s (btime {machine.btime:.0f})")
        elif kind == "reboot":
            machine = rng.choice(self.machines)
            for client in self.clients:
                if client.proc is not None and client.proc.machine is machine:
                    self._kill(client, False, f"{machine.name} reboots")
            self._boot(machine, uptime=rng.uniform(2.0, 20.0))
            self.say(f"{machine.name} rebooted: boot {machine.boot[:6]}")
        self._at(self.t + rng.expovariate(1.0 / (1.5 * self.plan.ttl)), -1)

    # -- the run ------------------------------------------------------------------------

    def _at(self, when: float, who: int) -> None:
        self._order += 1
        heapq.heappush(self.due, (when, self._order, who))

    def main(self) -> None:
        for client in self.clients:
            self._at(self.rng.uniform(0.0, 0.5) * self.plan.ttl, client.number)
        if self.plan.faults:
            self._at(self.rng.uniform(0.5, 2.0) * self.plan.ttl, -1)
        while self.due:
            when, _, who = heapq.heappop(self.due)
            if when > self.plan.duration:
                break
            self.t = when
            self.steps += 1
            if who < 0:
                self._fault()
            else:
                self._act(self.clients[who])
            self.check()

    def close(self) -> None:
        for client in self.clients:
            if client.attempt is not None:
                client.attempt.close()
            if client.backend is not None:
                client.backend.close()
        self.file.close()
        for machine in self.machines:
            sqlite_guess.btimes.pop(machine.boot, None)


def _where(proc: Proc) -> str:
    """Where ``proc`` runs, as a trace shows it."""
    shown = "" if proc.proc_ok else ", the host's /proc"
    return (
        f"{proc.machine.name} boot {proc.boot[:6]}, {proc.pidns} PID {proc.pid}, "
        f"{proc.timens}{shown}"
    )


@contextlib.contextmanager
def _directory() -> Iterator[str]:
    """A directory for the run's file: in memory where Linux offers one (tmpfs makes
    SQLite's checkpoints' fsyncs free; it is as real a file as any)."""
    shm = "/dev/shm"
    where = shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="fencelock-sim-", dir=where) as directory:
        yield directory


def run(plan: SqlitePlan) -> SqliteOutcome:
    """Run ``plan`` to its end or its first violation."""
    began = time.process_time()
    with _directory() as directory, reintroduced(*plan.bugs):
        world = SqliteWorld(plan, directory)
        try:
            world.main()
        except Violation:
            pass
        finally:
            world.close()
            sqlite_guess.btimes.clear()
    return SqliteOutcome(
        plan,
        world.violation,
        list(world.trace),
        world.steps,
        world.grants,
        world.t,
        time.process_time() - began,
        world.whole.hexdigest(),
        world.freed,
        world.faults,
    )


def replay_line(plan: SqlitePlan) -> str:
    return f"python -m fencelock.sim --family sqlite --seed {plan.seed}" + "".join(
        f" --bug {bug}" for bug in plan.bugs
    )


def report(outcome: SqliteOutcome) -> int:
    """Print a run's end: its violation and trace (1), or a line (0)."""
    if outcome.ok:
        print(
            f"seed {outcome.plan.seed}: ok, {outcome.steps} steps, {outcome.grants} grants in "
            f"{outcome.virtual_seconds:.1f} virtual seconds (trace {outcome.digest[:16]})"
        )
        return 0
    print(f"seed {outcome.plan.seed}: VIOLATION: {outcome.violation}")
    print("the last events (the world's seconds):")
    print("\n".join(f"  {line}" for line in outcome.trace))
    print(f"replay: {replay_line(outcome.plan)}")
    return 1


def search(plan: SqlitePlan, cpu: float) -> int:
    """Seeds from ``plan.seed`` on until ``cpu`` CPU seconds are spent or one fails."""
    began, seed, runs, steps = time.process_time(), plan.seed, 0, 0
    while time.process_time() - began < cpu:
        outcome = run(dataclasses.replace(plan, seed=seed))
        runs, steps = runs + 1, steps + outcome.steps
        if not outcome.ok:
            print(f"found after {runs} runs, {time.process_time() - began:.2f} CPU seconds")
            return report(outcome)
        seed += 1
    print(
        f"{runs} runs (seeds {plan.seed}-{seed - 1}), no violation: {steps} steps in "
        f"{time.process_time() - began:.1f} CPU seconds"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m fencelock.sim.sqlite_host``: as ``python -m fencelock.sim --family sqlite``."""
    parser = argparse.ArgumentParser(
        prog="python -m fencelock.sim.sqlite_host", description=__doc__
    )
    add_run_options(parser)
    args = parser.parse_args(argv)
    return cli(args)


def cli(args: argparse.Namespace) -> int:
    """Replay ``args.seed`` or search from ``args.first_seed`` for ``args.cpu`` seconds."""
    seed = args.first_seed if args.seed is None else args.seed
    plan = SqlitePlan(seed, args.clients, args.duration, args.ttl, tuple(args.bug))
    return report(run(plan)) if args.seed is not None else search(plan, args.cpu)


if __name__ == "__main__":
    sys.exit(main())
