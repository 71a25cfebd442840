"""The event loop of a check run, and the :class:`~fencelock.check.nemesis.Harness` of its nemeses.

It starts the clients, lets them all go at once, listens to what they report,
offers each client that is mid-critical-section to the armed nemeses, runs the
nemeses for the duration, then ends every fault, waits (bounded) for the clients
to finish, kills stragglers and records the final read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from fencelock import clock
from fencelock.backends import sqlite_file
from fencelock.check.history import Op, Recorder
from fencelock.check.nemesis import Nemesis, build
from fencelock.check.options import CheckOptions
from fencelock.check.progress import Observer, Stats
from fencelock.check.servers import ProxyHub, Reaper, ServerSet, proxied_url
from fencelock.check.sessions import end_session
from fencelock.check.supervisor import ClientProcess, HarnessError, Supervisor
from fencelock.check.workloads import ClientSpec, final_read, take_out
from fencelock.engine.urls import parse_url
from fencelock.testing.process import ServerProcess

READY_TIMEOUT = 60.0  # every client connected and waiting for the start
TICK = 0.01


@dataclass
class Setup:
    """What the run was given: its directory, the backend, the servers and proxies, the resource."""

    directory: Path
    url: str
    lock_name: str
    servers: ServerSet | None
    proxies: ProxyHub | None
    reaper: Reaper
    resource: Path
    params: dict[str, object] = field(default_factory=dict)


class Conductor:
    """The run's event loop; also the :class:`~fencelock.check.nemesis.Harness` nemeses use."""

    def __init__(self, options: CheckOptions, setup: Setup, observer: Observer) -> None:
        self.options, self.setup, self.observer = options, setup, observer
        self.ttl = options.ttl
        self.servers = setup.servers
        self.stats = Stats()
        self.recorder = Recorder(setup.directory / "history-runner.jsonl")
        self.deadline: float | None = None
        self.began = 0.0
        self.nemeses: list[Nemesis] = []
        self._next_id = 0
        self.supervisor = Supervisor(setup.directory, setup.reaper, _frozen_databases(setup))
        self.clients = self.supervisor.clients

    # the run

    def run(self) -> None:
        """Start the clients, run the nemeses for the duration, finish; always clean up."""
        try:
            for _ in range(self.options.clients):
                self.spawn()
            self._wait_ready()
            self.began = clock.now()
            self.deadline = self.began + self.options.duration
            self.observer.started(self.options.duration)
            self.nemeses = build(self.options.nemeses, self.options.seed, self.ttl, self.began)
            for c in self.clients.values():
                self.supervisor.go(c, self.deadline)
            self._loop()
            self._finish()
        finally:
            self.close()

    def _wait_ready(self) -> None:
        limit = clock.now() + READY_TIMEOUT
        while not all(c.ready for c in self.clients.values()):
            if clock.now() > limit:
                raise HarnessError(f"the clients did not start within {READY_TIMEOUT:.0f}s")
            self._pump(0.05)

    def _loop(self) -> None:
        assert self.deadline is not None
        shown = 0.0
        while (now := clock.now()) < self.deadline:
            self._pump(TICK)
            for nemesis in self.nemeses:
                nemesis.poll(self, clock.now())
            if now - shown >= 0.1:
                self._show(now)
                shown = now

    def _finish(self) -> None:
        """End every fault, let the clients finish (bounded), kill stragglers, read."""
        now = clock.now()
        for nemesis in self.nemeses:
            nemesis.end(self, now)
        grace = clock.now() + 3 * self.ttl + 10.0
        while any(not c.done for c in self.clients.values()) and clock.now() < grace:
            self._pump(0.05)
            self._show(clock.now())
        for c in self.clients.values():
            if not c.done:
                self.observer.note(f"client {c.id} did not stop in time: SIGKILL")
                self.supervisor.kill(c)
        start = clock.now()
        key, value = final_read(self.setup.resource, self.options.workload)
        self.record(Op(-1, "read", start, clock.now(), "ok", key=key, value=value,
                       detail="final read by the runner"))  # fmt: skip
        self._show(clock.now())
        self.observer.finished()

    def _show(self, now: float) -> None:
        self.stats.faults = sum(n.faults for n in self.nemeses)
        self.stats.clients = sum(1 for c in self.clients.values() if not c.done)
        self.observer.update(now - self.began, self.stats)

    def close(self) -> None:
        """Thaw, kill and reap every client process; close the history."""
        self.supervisor.close()
        self.recorder.close()

    # clients

    def spawn(self) -> int:
        """Start client process number ``self._next_id``; its id."""
        cid, self._next_id = self._next_id, self._next_id + 1
        setup = self.setup
        url = setup.url
        if setup.proxies is not None:
            upstream = [(h, p or 6379) for h, p in parse_url(url).hosts]
            url = proxied_url(url, setup.proxies.route(cid, upstream))
        spec = ClientSpec(
            client=cid,
            url=url,
            workload=self.options.workload,
            lock_name=setup.lock_name,
            resource=str(setup.resource),
            history=str(setup.directory / f"history-{cid}.jsonl"),
            ttl=self.ttl,
            work=self.options.work,
            fencing=self.options.fencing,
            seed=self.options.seed,
            fence_reads=self.options.fence_reads,
            fence_with=self.options.fence_with,
            parties=self.options.clients,
        )
        self.supervisor.start(spec)
        return cid

    def _pump(self, timeout: float) -> None:
        """Read what the clients said within ``timeout``; act on it."""
        for c, lines in self.supervisor.read(timeout):
            self._heard(c, lines)

    def _heard(self, c: ClientProcess, lines: list[list[str]]) -> None:
        last_release = max((i for i, w in enumerate(lines) if w[:1] == ["R"]), default=-1)
        for i, words in enumerate(lines):
            if words:
                # Still in its critical section, as far as we know, if no release follows.
                self._said(c, words[0], words[1] if len(words) > 1 else "", i > last_release)

    def _said(self, c: ClientProcess, word: str, arg: str, holding_now: bool) -> None:
        """One line of a client's (see workloads.Channel): a step of its loop."""
        if word == "ready":
            c.ready = True
            if self.deadline is not None and not c.started:
                self.supervisor.go(c, self.deadline)
        elif word == "H":
            c.holding = int(arg)
            if holding_now:
                self._offer(c, int(arg))
        elif word == "R":
            c.holding = None
        else:
            self._count(word, arg)

    def _count(self, word: str, arg: str) -> None:
        if word == "A":
            self.stats.acquisitions += 1
        elif word == "L":
            self.stats.lost += 1
        elif word == "W" and arg == "accepted":
            self.stats.accepted += 1
        elif word == "W" and arg == "stale":
            self.stats.stale += 1

    def _offer(self, c: ClientProcess, token: int) -> None:
        """A client is mid-critical-section: the first armed nemesis may strike it."""
        if self.deadline is None or c.frozen or c.done:
            return
        if any(c.id in n.busy_clients() for n in self.nemeses):
            return
        now = clock.now()
        for nemesis in self.nemeses:
            if nemesis.on_hold(self, now, c.id, token):
                return

    # the Harness protocol

    def freeze(self, client: int) -> bool:
        return self.supervisor.freeze(self.clients[client])

    def thaw(self, client: int) -> None:
        self.supervisor.thaw(self.clients[client])

    def crash(self, client: int, token: int | None, detail: str) -> int:
        now = clock.now()
        self.supervisor.remove(self.clients[client])
        if self.options.workload == "semaphore":
            take_out(self.setup.resource, client)  # a dead holder is inside no more
        self.record(Op(client, "crash", now, now, "info", token, detail=detail))
        self.stats.crashes += 1
        return self.spawn()

    def cut(self, client: int) -> None:
        assert self.setup.proxies is not None
        self.setup.proxies.cut(client)

    def heal(self, client: int) -> None:
        assert self.setup.proxies is not None
        self.setup.proxies.heal(client)

    def kill_server(self, node: ServerProcess) -> None:
        pid = node.pid
        node.kill()
        if pid is not None:
            self.setup.reaper.unwatch(pid)

    def restart(self, node: ServerProcess) -> None:
        node.start()
        if node.pid is not None:
            self.setup.reaper.watch(node.pid)

    def end_session(self, client: int, token: int | None) -> str:
        assert self.servers is not None
        return end_session(self.servers, self.setup.lock_name, token)

    def record(self, op: Op) -> None:
        self.recorder.record(op)

    def note(self, text: str) -> None:
        self.observer.note(text)

    def writes(self) -> int:
        return self.stats.accepted + self.stats.stale


def _frozen_databases(setup: Setup) -> list[Path]:
    """The SQLite files no client may be frozen writing to: the resource, the lock database."""
    databases = [setup.resource]
    lock_file = sqlite_file(setup.url)
    if lock_file is not None:
        databases.append(Path(lock_file))
    return databases
