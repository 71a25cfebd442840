"""Nemeses: the faults a check run injects, each on its own seeded schedule.

Every nemesis waits a random gap, then *arms*; an armed nemesis strikes at the
next moment a client reports it is inside its critical section (between its
lease check and its write, where a fault does the most harm), or, for faults
not aimed at a client, right away. A fault lasts a random multiple of the TTL,
then heals. Each fault is recorded as one ``nemesis`` op (process = the target
client, or -1 for a server fault) whose start and end are the fault window.

* ``pause``: SIGSTOP a holder for 1.5-3 x TTL, then SIGCONT (a GC pause). If no
  other client has written by then, the pause goes on until one has (at most
  ``OVERTAKE_CAP`` x TTL): a pause nobody overtook proves nothing, and a server
  may keep a lease past the TTL asked for (ZooKeeper's session, etcd's 2 s).
* ``kill``: SIGKILL a holder (a ``crash`` op is recorded) and start a
  replacement client with a new id.
* ``server``: SIGSTOP, or SIGKILL and restart empty after 1.5-3 x TTL, a lock
  server (harness-started servers only; for Redlock at most a minority).
* ``session``: end a holder's session from the server's side at that moment (MySQL
  ``KILL``, ``pg_terminate_backend``, an etcd lease revoked; on backends whose lease is
  not a connection, every client connection is dropped): :mod:`.sessions`.
* ``restart``: SIGKILL a lock server (a minority of Redlock's, one member of a
  cluster) while a client holds, and start it again at once, on its data where it
  keeps any (Redis keeps none).
* ``clock``: step a lock server's wall clock forward by 2 x TTL with
  libfaketime (Redis expires keys by the wall clock); for Redlock a majority of
  nodes steps at once (a shared bad time source: the only way a step can let a
  second client in).
* ``partition``: cut a holder off from every lock server for 1.5-3 x TTL
  (through the harness's TCP proxies).
* ``partition-restart``: cut a holder off from every lock server (as ``partition``),
  then SIGKILL a lock server (as ``restart``: a minority of Redlock's, one member of a
  cluster) and start it again at once; the cut heals 2-3 x TTL after it began. The
  holder hears nothing (not the hang-up, not a renewal's answer), so it trusts its
  lease to its end, while a server that lost its locks in the crash (MySQL's named
  locks, PostgreSQL's advisory locks, Redis without persistence) lets the next client
  in at once: only fencing protects the resource.

The schedule (gaps, durations, which servers) is reproducible from the seed;
which client happens to hold the lock at that moment is up to the run.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from fencelock import clock
from fencelock.check.history import Op
from fencelock.check.servers import CONSENSUS, ServerSet
from fencelock.testing.process import ServerProcess

NEMESES = (
    "pause",
    "kill",
    "server",
    "session",
    "restart",
    "clock",
    "partition",
    "partition-restart",
)
SERVER_NEMESES = ("server", "session", "restart", "clock", "partition-restart")
NETWORK_NEMESES = ("partition", "partition-restart")
OVERTAKE_CAP = 12.0  # the longest a pause waits for another client's write, in TTLs


class Harness(Protocol):
    """What the runner lets a nemesis do."""

    ttl: float
    servers: ServerSet | None

    def freeze(self, client: int) -> bool:
        """SIGSTOP ``client`` (outside any SQLite write lock); False if it could not."""

    def thaw(self, client: int) -> None:
        """SIGCONT ``client``."""

    def crash(self, client: int, token: int | None, detail: str) -> int:
        """SIGKILL ``client``, record its crash, start a replacement; the new client's id."""

    def cut(self, client: int) -> None:
        """Black-hole every link between ``client`` and the servers."""

    def heal(self, client: int) -> None:
        """Restore ``client``'s links."""

    def kill_server(self, node: ServerProcess) -> None:
        """SIGKILL lock server ``node`` (it loses every key)."""

    def restart(self, node: ServerProcess) -> None:
        """Start ``node`` again (empty) on its port."""

    def end_session(self, client: int, token: int | None) -> str:
        """End ``client``'s session holding ``token`` from the server's side; what was done."""

    def record(self, op: Op) -> None:
        """Add a runner op to the history."""

    def note(self, text: str) -> None:
        """Tell the user about a fault as it happens."""

    def writes(self) -> int:
        """How many writes (accepted or stale) the clients have reported so far."""


@dataclass
class _Active:
    target: int  # a client id, or -1
    start: float
    until: float
    detail: str
    token: int | None = None
    nodes: tuple[ServerProcess, ...] = ()
    killed: bool = False
    writes: int = 0  # the clients' write count when the fault began


class Nemesis:
    """Base class: the arm / strike / heal cycle on a seeded schedule."""

    name = "nemesis"
    aims_at_holder = True  # strikes when a client reports it is in its critical section
    gap = (1.0, 3.0)  # seconds between faults, in TTLs
    length = (1.5, 3.0)  # fault duration, in TTLs

    def __init__(self, seed: int, ttl: float, start: float) -> None:
        self.rng = random.Random(f"{seed}:{self.name}")  # noqa: S311 (a seeded schedule, to replay)
        self.ttl = ttl
        self.active: _Active | None = None
        self.faults = 0
        self.next_at = start + self._draw(self.gap)

    def _draw(self, span: tuple[float, float]) -> float:
        return self.rng.uniform(*span) * self.ttl

    def armed(self, now: float) -> bool:
        return self.active is None and now >= self.next_at

    def on_hold(self, h: Harness, now: float, client: int, token: int) -> bool:
        """A client reported it holds ``token`` mid-critical-section; True if we took it."""
        if not (self.aims_at_holder and self.armed(now)):
            return False
        return self.strike(h, now, client, token)

    def poll(self, h: Harness, now: float) -> None:
        """Called every tick: heal a fault that is due, or strike if not aiming at holders."""
        if self.active is not None and now >= self.active.until and self.over(h, now):
            self.end(h, now)
        elif not self.aims_at_holder and self.armed(now):
            self.strike(h, now, -1, None)

    def strike(self, h: Harness, now: float, client: int, token: int | None) -> bool:
        raise NotImplementedError

    def over(self, h: Harness, now: float) -> bool:
        """Whether the active fault, past its drawn length, may heal now."""
        return True

    def end(self, h: Harness, now: float) -> None:
        """Heal the active fault, record it, schedule the next."""
        active, self.active = self.active, None
        if active is None:
            return
        self.heal(h, active)
        detail = active.detail
        if now < active.until - 0.01:
            detail += f" (cut short to {now - active.start:.2f}s by the end of the run)"
        elif now > active.until + 0.05:
            detail += f" (held to {now - active.start:.2f}s, until another client wrote)"
        h.record(
            Op(active.target, "nemesis", active.start, now, "info", active.token, detail=detail)
        )
        self.next_at = now + self._draw(self.gap)

    def heal(self, h: Harness, active: _Active) -> None:
        raise NotImplementedError

    def _struck(
        self, h: Harness, process: int, start: float, end: float, token: int | None, detail: str
    ) -> bool:
        """A fault over at once (nothing to heal): recorded, told, counted; the next
        one scheduled."""
        h.record(Op(process, "nemesis", start, end, "info", token, detail=detail))
        h.note(detail)
        self.faults += 1
        self.next_at = end + self._draw(self.gap)
        return True

    def _begin(self, h: Harness, active: _Active) -> None:
        self.active = active
        self.faults += 1
        h.note(active.detail)

    def busy_clients(self) -> set[int]:
        """Clients this nemesis is holding in a fault (others must leave them alone)."""
        return (
            {self.active.target} if self.active is not None and self.active.target >= 0 else set()
        )


class Pause(Nemesis):
    name = "pause"
    gap = (0.5, 2.0)

    def strike(self, h: Harness, now: float, client: int, token: int | None) -> bool:
        if not h.freeze(client):
            return False
        length = self._draw(self.length)
        detail = f"pause client {client} (token {token}) for {length:.2f}s: SIGSTOP"
        self._begin(h, _Active(client, now, now + length, detail, token, writes=h.writes()))
        return True

    def over(self, h: Harness, now: float) -> bool:
        active = self.active
        assert active is not None
        return h.writes() > active.writes or now >= active.start + OVERTAKE_CAP * self.ttl

    def heal(self, h: Harness, active: _Active) -> None:
        h.thaw(active.target)


class Kill(Nemesis):
    name = "kill"
    gap = (2.0, 4.0)

    def strike(self, h: Harness, now: float, client: int, token: int | None) -> bool:
        new = h.crash(client, token, f"killed by the kill nemesis holding token {token}")
        detail = f"kill client {client} (token {token}): SIGKILL; replaced by client {new}"
        return self._struck(h, client, now, now, token, detail)

    def heal(self, h: Harness, active: _Active) -> None:
        return None


class Partition(Nemesis):
    name = "partition"
    gap = (1.0, 3.0)

    def strike(self, h: Harness, now: float, client: int, token: int | None) -> bool:
        h.cut(client)
        length = self._draw(self.length)
        detail = f"partition client {client} (token {token}) from the servers for {length:.2f}s"
        self._begin(h, _Active(client, now, now + length, detail, token))
        return True

    def heal(self, h: Harness, active: _Active) -> None:
        h.heal(active.target)


class ServerFault(Nemesis):
    """Pause, or kill and later restart, a lock server (a minority of Redlock's nodes)."""

    name = "server"
    aims_at_holder = False
    gap = (1.0, 3.0)

    def _victims(self, nodes: Sequence[ServerProcess]) -> tuple[ServerProcess, ...]:
        if len(nodes) == 1:
            return (nodes[0],)
        minority = (len(nodes) - 1) // 2
        return tuple(self.rng.sample(list(nodes), self.rng.randint(1, minority)))

    def strike(self, h: Harness, now: float, client: int, token: int | None) -> bool:
        assert h.servers is not None
        nodes = self._victims(h.servers.nodes)
        length = self._draw(self.length)
        names = ",".join(n.name for n in nodes)
        kill = self.rng.random() < 0.5
        for node in nodes:
            if kill:
                h.kill_server(node)
            else:
                node.pause()
        if kill:
            how = "with its data" if h.servers.kind in CONSENSUS else "empty"
            detail = f"kill server {names}: SIGKILL, restarted {how} after {length:.2f}s"
        else:
            detail = f"pause server {names} for {length:.2f}s: SIGSTOP"
        self._begin(h, _Active(-1, now, now + length, detail, None, nodes, kill))
        return True

    def heal(self, h: Harness, active: _Active) -> None:
        for node in active.nodes:
            if active.killed:
                h.restart(node)
            else:
                node.resume()


class SessionEnd(Nemesis):
    """End a holder's session from the server's side, mid-critical-section."""

    name = "session"
    gap = (1.0, 3.0)

    def strike(self, h: Harness, now: float, client: int, token: int | None) -> bool:
        done = h.end_session(client, token)
        detail = f"end the session of client {client} (token {token}): {done}"
        return self._struck(h, client, now, now, token, detail)

    def heal(self, h: Harness, active: _Active) -> None:
        return None


class FastRestart(ServerFault):
    """SIGKILL a lock server while a client holds, and start it again at once."""

    name = "restart"
    aims_at_holder = True
    gap = (2.0, 4.0)

    def strike(self, h: Harness, now: float, client: int, token: int | None) -> bool:
        assert h.servers is not None
        nodes = self._victims(h.servers.nodes)
        for node in nodes:
            h.kill_server(node)
        for node in nodes:
            h.restart(node)
        end = clock.now()
        how = "empty" if h.servers.kind in ("redis", "redlock") else "on its data"
        names = ",".join(n.name for n in nodes)
        detail = (
            f"restart server {names} while client {client} held token {token}: SIGKILL, "
            f"started again at once ({how}; up after {end - now:.2f}s)"
        )
        return self._struck(h, -1, now, end, token, detail)

    def heal(self, h: Harness, active: _Active) -> None:
        return None


class PartitionRestart(FastRestart):
    """Cut a holder off from every server, then SIGKILL a server and start it again at once.

    The cut comes first, so the holder hears nothing of the crash: the proxies hold
    back the close of its connections, and its renewals go unanswered. The cut lasts
    2-3 x TTL from the strike (at least until the server is up again), longer than
    any lease the holder may have extended to (at most 2 x TTL before the strike),
    so the holder's own clock ends its trust while it is still cut off.
    """

    name = "partition-restart"
    gap = (1.0, 2.0)  # a fault is long (2-3 x TTL): come back sooner than ``restart``
    length = (2.0, 3.0)

    def strike(self, h: Harness, now: float, client: int, token: int | None) -> bool:
        assert h.servers is not None
        h.cut(client)
        nodes = self._victims(h.servers.nodes)
        began = clock.now()
        for node in nodes:
            h.kill_server(node)
        for node in nodes:
            h.restart(node)
        took = clock.now() - began
        length = self._draw(self.length)
        how = "empty" if h.servers.kind in ("redis", "redlock") else "on its data"
        names = ",".join(n.name for n in nodes)
        detail = (
            f"partition-restart client {client} (token {token}): cut from the servers, "
            f"then server {names} SIGKILLed and started again at once ({how}; up after "
            f"{took:.2f}s); the cut healed after {max(length, took):.2f}s"
        )
        until = now + max(length, took)
        self._begin(h, _Active(client, now, until, detail, token, nodes, killed=True))
        return True

    def heal(self, h: Harness, active: _Active) -> None:
        h.heal(active.target)


class ClockJump(Nemesis):
    """Step lock servers' wall clocks forward by 2 x TTL; strikes while a client holds."""

    name = "clock"
    gap = (2.0, 4.0)
    step = 2.0  # in TTLs

    def strike(self, h: Harness, now: float, client: int, token: int | None) -> bool:
        assert h.servers is not None
        all_nodes = h.servers.nodes
        nodes = (
            tuple(all_nodes)
            if len(all_nodes) == 1
            else tuple(self.rng.sample(list(all_nodes), len(all_nodes) // 2 + 1))
        )
        seconds = self.step * self.ttl
        totals = [node.step_clock(seconds) for node in nodes]
        names = ",".join(n.name for n in nodes)
        detail = (
            f"clock of server {names} stepped +{seconds:.2f}s (total +{max(totals):.2f}s) "
            f"while client {client} held token {token}"
        )
        return self._struck(h, -1, now, now, token, detail)

    def heal(self, h: Harness, active: _Active) -> None:
        return None


_KINDS: dict[str, type[Nemesis]] = {
    "pause": Pause,
    "kill": Kill,
    "server": ServerFault,
    "session": SessionEnd,
    "restart": FastRestart,
    "clock": ClockJump,
    "partition": Partition,
    "partition-restart": PartitionRestart,
}


def parse_nemeses(text: str) -> tuple[str, ...]:
    """``"pause,kill"`` -> ``("pause", "kill")``; ValueError naming an unknown one."""
    names = tuple(dict.fromkeys(n.strip().lower() for n in text.split(",") if n.strip()))
    for name in names:
        if name not in NEMESES and name != "none":
            raise ValueError(f"unknown nemesis {name!r} (choose from {', '.join(NEMESES)})")
    return tuple(n for n in names if n != "none")


def build(names: Sequence[str], seed: int, ttl: float, start: float) -> list[Nemesis]:
    """The nemeses named, each with its own stream of the seed."""
    return [_KINDS[name](seed, ttl, start) for name in names]
