"""The life of one throwaway server process: started, ready, faulted, stopped.

:class:`ServerProcess` owns what every kind of server shares: a free loopback port,
a working directory, a log file (stdout and stderr), a readiness wait, and signals
by PID: ``pause`` (SIGSTOP), ``resume`` (SIGCONT), ``kill`` (SIGKILL) and ``stop``
(SIGCONT, should it be paused, then SIGTERM, then SIGKILL after a grace period).

A kind of server is one small subclass (``redis.py``, ``etcd.py``, ``zookeeper.py``;
the SQL ones on ``sql_server.py``): its ``kind``, its program, its ``argv()``, its
``ready()`` check and its ``url``; ``prepare()`` writes any files it needs before it
starts (a config file, an initialised data directory). A kind that takes keywords of
its own passes the shared ones (:class:`ServerOptions`) on as ``**options``.

Every server started in this process is remembered (weakly) so a test's failure
report can show the logs of the servers it used (``pytest_plugin.py``).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import time
import weakref
from pathlib import Path
from typing import ClassVar, TypedDict

from fencelock.testing.tools import (
    LOOPBACK,
    FakeClock,
    ServerStartError,
    free_port,
    require_binary,
)

READY_TIMEOUT = 15.0
STOP_GRACE = 5.0
LOG_TAIL = 4000  # characters of the log an error message or a report shows

_ids = itertools.count()
_started: weakref.WeakValueDictionary[int, ServerProcess] = weakref.WeakValueDictionary()


def started_servers() -> list[ServerProcess]:
    """Every server started in this process and not yet garbage, oldest first."""
    return list(_started.values())


class ServerOptions(TypedDict, total=False):
    """The keywords every kind of server takes, as :class:`ServerProcess` reads them."""

    name: str | None
    port: int | None
    clock: FakeClock | None


class ServerProcess:
    """One server on a free loopback port, in ``workdir``, logging to ``log_path``.

    ``port`` is chosen at construction and kept across restarts (``start`` after
    ``kill`` or ``stop`` brings it back, empty unless it persists, on the same port).
    ``clock``: run it under libfaketime so its wall clock can be stepped.
    """

    kind: ClassVar[str] = "server"
    program: ClassVar[str] = ""  # the executable: in ``directory``, else on PATH
    package: ClassVar[str] = ""  # the Debian package that has it
    directory: ClassVar[Path | None] = None  # looked in first (such as tools.SBIN)

    def __init__(
        self,
        workdir: Path,
        *,
        name: str | None = None,
        port: int | None = None,
        clock: FakeClock | None = None,
    ) -> None:
        self.workdir = workdir
        self.name = name or self.kind
        self.port = port or free_port()
        self.clock = clock
        self.log_path = workdir / f"{self.name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False
        self._id = next(_ids)

    # what a kind defines

    def argv(self) -> list[str]:
        """The command line that starts this server in the foreground."""
        raise NotImplementedError

    def ready(self) -> bool:
        """True once the server answers a request (called until it does)."""
        raise NotImplementedError

    @property
    def url(self) -> str:
        """The fencelock URL of this server."""
        raise NotImplementedError

    def prepare(self) -> None:
        """Make what the server needs before each start (by default: its directory)."""
        self.workdir.mkdir(parents=True, exist_ok=True)

    # the life of the process

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``."""
        return f"{LOOPBACK}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The process id of the last start, or None if never started."""
        return None if self.proc is None else self.proc.pid

    @property
    def alive(self) -> bool:
        """True while the process runs (or is paused)."""
        return self.proc is not None and self.proc.poll() is None

    def executable(self) -> str:
        """The program's path (in ``directory``, else on PATH); ToolMissing names its
        package if it is not installed."""
        if self.directory is not None and (self.directory / self.program).exists():
            return str(self.directory / self.program)
        return require_binary(self.program, self.package or self.program)

    def start(self, timeout: float = READY_TIMEOUT) -> None:
        """Start (or restart) the server and wait until :meth:`ready`.

        Raises ServerStartError with the log's tail if it exits or is not ready
        within ``timeout`` seconds (then it is killed), ToolMissing without its program.
        """
        self.launch()
        self.wait_ready(timeout)

    def launch(self) -> None:
        """Start the process without waiting for it to be ready (a cluster's members
        become ready only together: launch them all, then :meth:`wait_ready` each)."""
        if self.alive:
            raise RuntimeError(f"{self.name} is already running (pid {self.pid})")
        argv = self.argv()
        self.prepare()
        env = dict(os.environ)
        if self.clock is not None:
            env.update(self.clock.environment())
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(  # noqa: S603 (a test server with arguments built here, no shell)
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                env=env,
                start_new_session=True,  # a Ctrl-C in the terminal is not the server's
            )
        self.paused = False
        _started[self._id] = self

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        """Poll :meth:`ready` until true; ServerStartError if it exits or times out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive:
                raise ServerStartError(f"{self.name} exited at start:\n{self.log()}")
            if self.ready():
                return
            time.sleep(0.02)
        self.kill()
        raise ServerStartError(f"{self.name} not ready after {timeout:g}s:\n{self.log()}")

    def log(self, limit: int = LOG_TAIL, since: int = 0) -> str:
        """The last ``limit`` characters of the log written after byte ``since``."""
        try:
            with self.log_path.open("rb") as log:
                log.seek(since)
                return log.read().decode(errors="replace")[-limit:]
        except OSError:
            return ""

    def log_size(self) -> int:
        """How many bytes the log has now (a mark for :meth:`log`'s ``since``)."""
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def pause(self) -> None:
        """SIGSTOP: the server holds its connections and answers nothing."""
        if self._signal(signal.SIGSTOP):
            self.paused = True

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        self._signal(signal.SIGCONT)
        self.paused = False

    def kill(self) -> None:
        """SIGKILL (resumed first, should it be paused), and reap it."""
        if self._signal(signal.SIGCONT):
            self._signal(signal.SIGKILL)
            self._reap(10.0)
        self.paused = False

    def stop(self, grace: float = STOP_GRACE) -> None:
        """SIGCONT, SIGTERM, and SIGKILL if it has not exited within ``grace`` seconds."""
        if self._signal(signal.SIGCONT):
            self._signal(signal.SIGTERM)
            if not self._reap(grace):
                self._signal(signal.SIGKILL)
                self._reap(10.0)
        self.paused = False

    def step_clock(self, seconds: float) -> float:
        """Step this server's wall clock forward by ``seconds``; the total offset now."""
        if self.clock is None:
            raise RuntimeError(f"{self.name} was not started under libfaketime")
        return self.clock.step(seconds)

    def _signal(self, sig: signal.Signals) -> bool:
        """Send ``sig`` by PID if the process runs; False if it does not."""
        if not self.alive or self.proc is None:
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, sig)
        return True

    def _reap(self, timeout: float) -> bool:
        assert self.proc is not None
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    def __repr__(self) -> str:
        state = "running" if self.alive else "stopped"
        return f"<{type(self).__name__} {self.name} {self.address} pid={self.pid} {state}>"
