"""The check run: servers, clients, nemeses, the merged history and the verdict.

:func:`run_check` starts the lock servers if asked (``--servers``), spawns the
client processes (:mod:`fencelock.check.workloads`), lets them all go at once,
runs the nemeses for the duration, stops everything (with a hard deadline:
stragglers are killed, and a reaper process kills whatever is left should the
runner itself die), records the final read, merges the history files and
checks them (:func:`fencelock.check.checker.check`).

Nothing is left running afterwards: not on success, not on an error, not on
Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import IO, Protocol

import fencelock
from fencelock import clock
from fencelock.check.checker import CheckResult, check
from fencelock.check.history import History, Op, Recorder, read_history
from fencelock.check.nemesis import (
    NEMESES,
    NETWORK_NEMESES,
    SERVER_NEMESES,
    Nemesis,
    build,
)
from fencelock.check.servers import (
    ProxyHub,
    Reaper,
    RedisNode,
    ServerSet,
    faketime_preload,
    proxied_url,
    require_binary,
)
from fencelock.check.workloads import WORKLOADS, ClientSpec, create_resource, final_read
from fencelock.engine.urls import parse_url
from fencelock.errors import ConfigError, FencelockError

READY_TIMEOUT = 60.0  # every client connected and waiting for the start
FREEZE_ATTEMPTS = 50
TICK = 0.01


class HarnessError(FencelockError):
    """The harness itself could not run (a client failed to start, ...)."""


@dataclass(frozen=True)
class CheckOptions:
    """One check run. ``url`` or ``servers`` (neither: a fresh SQLite file in the run dir)."""

    url: str | None = None
    servers: str | None = None  # "redis" | "redlock": the harness starts them
    workload: str = "register"
    clients: int = 8
    duration: float = 10.0
    ttl: float = 1.0
    work: float = 0.01  # mean seconds of "work" between the lease check and the write
    nemeses: tuple[str, ...] = ("pause", "kill")
    fencing: bool = True
    seed: int = 0
    report: Path | None = None
    fence_reads: bool = True  # False: fence the write only (shows why that is not enough)


@dataclass
class Stats:
    """Running totals for the progress display."""

    acquisitions: int = 0
    accepted: int = 0
    stale: int = 0
    lost: int = 0
    faults: int = 0
    clients: int = 0
    crashes: int = 0


@dataclass
class CheckRun:
    """A finished run: the verdict, the history, and where its files are."""

    result: CheckResult
    history: History
    directory: Path
    kept: bool  # False: the directory was a temporary one and has been removed
    url: str


class Observer(Protocol):
    """Where a run reports its progress."""

    def started(self, duration: float) -> None: ...

    def update(self, elapsed: float, stats: Stats) -> None: ...

    def note(self, text: str) -> None: ...

    def finished(self) -> None: ...


class QuietObserver:
    """Reports nothing."""

    def started(self, duration: float) -> None:
        return None

    def update(self, elapsed: float, stats: Stats) -> None:
        return None

    def note(self, text: str) -> None:
        return None

    def finished(self) -> None:
        return None


class RichProgress:
    """A live line: elapsed / duration, acquisitions, writes, faults; each fault printed."""

    def __init__(self, console: object) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn

        assert isinstance(console, Console)
        self._progress = Progress(
            TextColumn("[bold]fencelock check[/]"),
            BarColumn(),
            TextColumn("{task.fields[clock]}"),
            TextColumn("{task.fields[stats]}"),
            console=console,
            transient=True,
        )
        self._task = self._progress.add_task("check", total=1.0, clock="", stats="")
        self._duration = 1.0

    def __enter__(self) -> RichProgress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._progress.live.is_started:
            self._progress.stop()

    def started(self, duration: float) -> None:
        self._duration = duration
        self._progress.update(self._task, total=duration, completed=0)
        self._progress.start()  # only now: a run that fails to start prints one line

    def update(self, elapsed: float, stats: Stats) -> None:
        self._progress.update(
            self._task,
            completed=min(elapsed, self._duration),
            clock=f"{min(elapsed, self._duration):5.1f}/{self._duration:g}s",
            stats=(
                f"{stats.acquisitions} acquisitions · {stats.accepted} writes · "
                f"{stats.stale} stale rejected · {stats.lost} leases lost · "
                f"{stats.faults} faults"
            ),
        )

    def note(self, text: str) -> None:
        self._progress.console.print(f"  [magenta]⚡[/] {text}", highlight=False)

    def finished(self) -> None:
        self._progress.update(self._task, completed=self._duration)


# --- validation ----------------------------------------------------------------------------


def validate(options: CheckOptions) -> None:
    """Raise ConfigError for a run that cannot be made (one clear sentence)."""
    if options.workload not in WORKLOADS:
        raise ConfigError(
            f"unknown workload {options.workload!r} (choose from {', '.join(WORKLOADS)})"
        )
    for name in options.nemeses:
        if name not in NEMESES:
            raise ConfigError(f"unknown nemesis {name!r} (choose from {', '.join(NEMESES)})")
    if options.clients < 2:
        raise ConfigError("--clients must be at least 2: someone has to take over the lock")
    if not 0.05 <= options.ttl <= 60:
        raise ConfigError("--ttl must be between 0.05 and 60 seconds")
    if options.duration <= 0:
        raise ConfigError("--duration must be positive")
    if options.work < 0:
        raise ConfigError("--work must be 0 or more seconds")
    if not options.fencing and not options.fence_reads:
        raise ConfigError("--fence-writes-only and --no-fencing contradict each other")
    if options.servers is not None and options.url is not None:
        raise ConfigError("give --url or --servers, not both")
    if options.servers not in (None, "redis", "redlock"):
        raise ConfigError(f"--servers must be redis or redlock, not {options.servers!r}")
    scheme = _scheme(options)
    if scheme == "memory":
        raise ConfigError(
            "memory:// keeps its locks inside one process, and fencelock check runs every "
            "client in its own process: use sqlite:///path, redis:// or redlock://"
        )
    wants_servers = [n for n in options.nemeses if n in SERVER_NEMESES]
    if wants_servers and options.servers is None:
        raise ConfigError(
            f"the {wants_servers[0]} nemesis needs servers the harness started itself: "
            "use --servers redis or --servers redlock instead of --url"
        )
    if any(n in NETWORK_NEMESES for n in options.nemeses) and scheme == "sqlite":
        raise ConfigError(
            "the partition nemesis cuts clients off a lock server; sqlite:// has none "
            "(use --servers redis|redlock, or a redis:// or redlock:// --url)"
        )


def _scheme(options: CheckOptions) -> str:
    if options.servers is not None:
        return options.servers
    if options.url is None:
        return "sqlite"
    return parse_url(options.url).scheme


# --- the run -----------------------------------------------------------------------------


@dataclass
class _Client:
    id: int
    proc: subprocess.Popen[bytes]
    buffer: bytes = b""
    ready: bool = False
    started: bool = False
    holding: int | None = None
    frozen: bool = False
    done: bool = False


@dataclass
class _Setup:
    directory: Path
    url: str
    lock_name: str
    servers: ServerSet | None
    proxies: ProxyHub | None
    reaper: Reaper
    resource: Path
    params: dict[str, object] = field(default_factory=dict)


def _send_spec(proc: subprocess.Popen[bytes], spec: ClientSpec) -> None:
    """The client's settings on its stdin, not its command line: any user can read that
    (``ps``), and the backend URL may hold a password."""
    assert proc.stdin is not None
    with contextlib.suppress(OSError):  # a client that died at once is noticed by _pump
        proc.stdin.write(spec.to_json().encode() + b"\n")
        proc.stdin.flush()


class Runner:
    """The run's event loop; also the :class:`~fencelock.check.nemesis.Harness` nemeses use."""

    def __init__(self, options: CheckOptions, setup: _Setup, observer: Observer) -> None:
        self.options, self.setup, self.observer = options, setup, observer
        self.ttl = options.ttl
        self.servers = setup.servers
        self.clients: dict[int, _Client] = {}
        self.stats = Stats()
        self.selector = selectors.DefaultSelector()
        self.recorder = Recorder(setup.directory / "history-runner.jsonl")
        self.deadline: float | None = None
        self.began = 0.0
        self.nemeses: list[Nemesis] = []
        self._next_id = 0
        self._probes = [_probe(setup.resource)]
        lock_db = _sqlite_lock_path(setup.url)
        if lock_db is not None:
            self._probes.append(_probe(lock_db))

    # the run

    def run(self) -> None:
        try:
            for _ in range(self.options.clients):
                self.spawn()
            self._wait_ready()
            self.began = clock.now()
            self.deadline = self.began + self.options.duration
            self.observer.started(self.options.duration)
            self.nemeses = build(self.options.nemeses, self.options.seed, self.ttl, self.began)
            for c in self.clients.values():
                self._go(c)
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
                self._kill(c)
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
        for c in self.clients.values():
            if not c.done or c.proc.poll() is None:
                self._kill(c)
        self.selector.close()
        for probe in self._probes:
            probe.close()
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
        )
        with (setup.directory / f"client-{cid}.log").open("ab") as log:
            proc = subprocess.Popen(
                # the history path only names the run in ps; the settings go to stdin
                [sys.executable, "-m", "fencelock.check.workloads", spec.history],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                start_new_session=True,
            )
        setup.reaper.watch(proc.pid)
        _send_spec(proc, spec)
        assert proc.stdout is not None
        os.set_blocking(proc.stdout.fileno(), False)
        client = _Client(cid, proc)
        self.clients[cid] = client
        self.selector.register(proc.stdout, selectors.EVENT_READ, client)
        return cid

    def _go(self, c: _Client) -> None:
        assert self.deadline is not None and c.proc.stdin is not None
        with contextlib.suppress(OSError):
            c.proc.stdin.write(f"go {self.deadline!r}\n".encode())
            c.proc.stdin.flush()
        c.started = True

    def _pump(self, timeout: float) -> None:
        """Read what the clients said within ``timeout``; act on it."""
        if not self.selector.get_map():
            time.sleep(timeout)
            return
        for key, _ in self.selector.select(timeout):
            c: _Client = key.data
            stream: IO[bytes] = key.fileobj  # type: ignore[assignment]
            try:
                data = os.read(stream.fileno(), 65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                self._ended(c)
                continue
            c.buffer += data
            *lines, c.buffer = c.buffer.split(b"\n")
            self._heard(c, [line.decode(errors="replace").split() for line in lines])

    def _ended(self, c: _Client) -> None:
        assert c.proc.stdout is not None
        self.selector.unregister(c.proc.stdout)
        try:
            c.proc.wait(5)
        except subprocess.TimeoutExpired:
            self._kill(c)
        self.setup.reaper.unwatch(c.proc.pid)
        c.done = True
        if not c.ready:
            raise HarnessError(
                f"client {c.id} exited before it was ready (exit code {c.proc.returncode}): "
                + _tail(self.setup.directory / f"client-{c.id}.log")
            )

    def _heard(self, c: _Client, lines: list[list[str]]) -> None:
        last_release = max((i for i, w in enumerate(lines) if w[:1] == ["R"]), default=-1)
        for i, words in enumerate(lines):
            if not words:
                continue
            word, arg = words[0], words[1] if len(words) > 1 else ""
            if word == "ready":
                c.ready = True
                if self.deadline is not None and not c.started:
                    self._go(c)
            elif word == "A":
                self.stats.acquisitions += 1
            elif word == "H":
                c.holding = int(arg)
                if i > last_release:  # still in its critical section, as far as we know
                    self._offer(c, int(arg))
            elif word == "R":
                c.holding = None
            elif word == "L":
                self.stats.lost += 1
            elif word == "W" and arg == "accepted":
                self.stats.accepted += 1
            elif word == "W" and arg == "stale":
                self.stats.stale += 1

    def _offer(self, c: _Client, token: int) -> None:
        """A client is mid-critical-section: the first armed nemesis may strike it."""
        if self.deadline is None or c.frozen or c.done:
            return
        if any(c.id in n.busy_clients() for n in self.nemeses):
            return
        now = clock.now()
        for nemesis in self.nemeses:
            if nemesis.on_hold(self, now, c.id, token):
                return

    def _kill(self, c: _Client) -> None:
        if c.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(c.proc.pid, signal.SIGCONT)
            c.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            c.proc.wait(10)
        for stream in (c.proc.stdin, c.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self.setup.reaper.unwatch(c.proc.pid)
        c.done = True
        c.frozen = False

    # the Harness protocol

    def freeze(self, client: int) -> bool:
        c = self.clients[client]
        for _ in range(FREEZE_ATTEMPTS):
            try:
                os.kill(c.proc.pid, signal.SIGSTOP)
            except ProcessLookupError:
                return False
            _wait_stopped(c.proc.pid)
            if all(_write_lock_free(p) for p in self._probes):
                c.frozen = True
                return True
            os.kill(c.proc.pid, signal.SIGCONT)
            time.sleep(0.001)
        return False

    def thaw(self, client: int) -> None:
        c = self.clients[client]
        if c.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(c.proc.pid, signal.SIGCONT)
        c.frozen = False

    def crash(self, client: int, token: int | None, detail: str) -> int:
        c = self.clients[client]
        now = clock.now()
        with contextlib.suppress(KeyError, ValueError):
            assert c.proc.stdout is not None
            self.selector.unregister(c.proc.stdout)
        self._kill(c)
        self.record(Op(client, "crash", now, now, "info", token, detail=detail))
        self.stats.crashes += 1
        return self.spawn()

    def cut(self, client: int) -> None:
        assert self.setup.proxies is not None
        self.setup.proxies.cut(client)

    def heal(self, client: int) -> None:
        assert self.setup.proxies is not None
        self.setup.proxies.heal(client)

    def kill_server(self, node: RedisNode) -> None:
        pid = node.pid
        node.kill()
        if pid is not None:
            self.setup.reaper.unwatch(pid)

    def restart(self, node: RedisNode) -> None:
        node.start()
        if node.pid is not None:
            self.setup.reaper.watch(node.pid)

    def record(self, op: Op) -> None:
        self.recorder.record(op)

    def note(self, text: str) -> None:
        self.observer.note(text)


def _tail(path: Path, size: int = 1500) -> str:
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return "(no log)"
    return text[-size:] or "(empty log)"


def _wait_stopped(pid: int, limit: float = 1.0) -> None:
    """Wait until the kernel reports ``pid`` stopped (state T in /proc)."""
    stat = Path(f"/proc/{pid}/stat")
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            state = stat.read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            time.sleep(0.01)  # no /proc: give the signal a moment
            return
        if state in ("T", "t"):
            return
        time.sleep(0.0005)


def _probe(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(str(path), timeout=0, isolation_level=None)


def _write_lock_free(probe: sqlite3.Connection) -> bool:
    """True if nobody holds the database's write lock (a frozen holder would block all)."""
    try:
        probe.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError:
        return False
    probe.execute("ROLLBACK")
    return True


def _sqlite_lock_path(url: str) -> Path | None:
    parsed = parse_url(url)
    if parsed.scheme != "sqlite":
        return None
    from fencelock.backends.sqlite import database_path

    return Path(database_path(parsed))


# --- setting up and tearing down -----------------------------------------------------------


_RUN_FILES = (
    "history-*.jsonl",
    "client-*.log",
    "resource.db*",
    "locks.db*",
    "redis-*",
    "params.json",
    "result.json",
    "report.html",
)


def _prepare_directory(report: Path | None) -> Path:
    if report is None:
        return Path(tempfile.mkdtemp(prefix="fencelock-check-"))
    report.mkdir(parents=True, exist_ok=True)
    for pattern in _RUN_FILES:  # an earlier run's files would merge into this history
        for old in report.glob(pattern):
            if old.is_file():
                old.unlink()
    return report.resolve()


def _redis_timeout(ttl: float) -> float:
    """Per-request timeout of harness-made redis:// URLs: a stall is noticed within the TTL."""
    return round(min(max(ttl / 2, 0.1), 2.0), 3)


def _params(options: CheckOptions, url: str, lock_name: str) -> dict[str, object]:
    return {
        "workload": options.workload,
        "backend": parse_url(url).redacted,
        "servers": options.servers,
        "clients": options.clients,
        "duration": options.duration,
        "ttl": options.ttl,
        "work": options.work,
        "nemeses": list(options.nemeses),
        "fencing": options.fencing,
        "fence_reads": options.fencing and options.fence_reads,
        "seed": options.seed,
        "lock": lock_name,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so the cleanup runs (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _check_tools(options: CheckOptions) -> None:
    if options.servers is not None:
        require_binary("redis-server", "redis-server")
    if "clock" in options.nemeses:
        faketime_preload()


def _probe_backend(url: str, lock_name: str) -> None:
    """Raise BackendUnavailable now, not in eight clients later."""
    with fencelock.connect(url) as client:
        client.inspect(lock_name)


def run_check(options: CheckOptions, observer: Observer | None = None) -> CheckRun:
    """Run one check; the verdict and the history. Raises ConfigError, BackendUnavailable."""
    validate(options)
    _check_tools(options)
    observer = observer or QuietObserver()
    directory = _prepare_directory(options.report)
    lock_name = f"fencelock-check/{os.getpid()}-{int(time.time())}/{options.workload}"
    finished = keep = False
    try:
        with _terminate_as_interrupt(), contextlib.ExitStack() as stack:
            reaper = Reaper()
            stack.callback(reaper.close)
            servers = None
            if options.servers is not None:
                servers = ServerSet.start(
                    options.servers,  # type: ignore[arg-type]
                    directory,
                    faketime="clock" in options.nemeses,
                    timeout=_redis_timeout(options.ttl),
                )
                stack.callback(_stop_servers, servers, reaper)
                for pid in servers.pids():
                    reaper.watch(pid)
                url = servers.url
            else:
                url = options.url or f"sqlite:///{directory / 'locks.db'}"
            _probe_backend(url, lock_name)
            proxies = None
            if any(n in NETWORK_NEMESES for n in options.nemeses):
                proxies = ProxyHub()
                stack.callback(proxies.close)
            resource = directory / "resource.db"
            create_resource(resource)
            params = _params(options, url, lock_name)
            (directory / "params.json").write_text(json.dumps(params, indent=2) + "\n")
            setup = _Setup(directory, url, lock_name, servers, proxies, reaper, resource, params)
            Runner(options, setup, observer).run()
        history = read_history(sorted(directory.glob("history-*.jsonl")), params)
        result = check(history)
        keep = options.report is not None or not result.ok
        if keep:
            write_report(result, history, directory)
        finished = True
    finally:
        if not (finished and keep):
            shutil.rmtree(directory, ignore_errors=True)
    return CheckRun(result, history, directory, keep, url)


def _stop_servers(servers: ServerSet, reaper: Reaper) -> None:
    for node in servers.nodes:
        pid = node.pid
        node.stop()
        if pid is not None:
            reaper.unwatch(pid)


def write_report(result: CheckResult, history: History, directory: Path) -> None:
    """``result.json`` and ``report.html`` beside the history files."""
    from fencelock.check.report.json_doc import to_json
    from fencelock.check.report.page import write_html

    doc = to_json(result, history)
    (directory / "result.json").write_text(json.dumps(doc, indent=2, default=str) + "\n")
    write_html(result, history, directory / "report.html")
