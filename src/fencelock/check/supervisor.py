"""The client processes of a check run: started, listened to, frozen, thawed, killed, reaped.

Each client is a ``python -m fencelock.check.workloads`` process in a session of
its own, watched by the :class:`~fencelock.check.servers.Reaper` (which kills it
should the harness die). Its settings go to its stdin, what it reports comes
back a line at a time on its stdout, and its stderr goes to ``client-N.log``.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from fencelock.check.servers import Reaper
from fencelock.check.workloads import ClientSpec
from fencelock.errors import FencelockError
from fencelock.toolkit import processes

FREEZE_ATTEMPTS = 50


class HarnessError(FencelockError):
    """The harness itself could not run (a client failed to start, ...)."""


@dataclass
class ClientProcess:
    """One client process and what the run knows of it."""

    id: int
    proc: subprocess.Popen[bytes]
    buffer: bytes = b""
    ready: bool = False
    started: bool = False
    holding: int | None = None
    frozen: bool = False
    done: bool = False


class Supervisor:
    """Every client process of one run, in the run's ``directory``."""

    def __init__(self, directory: Path, reaper: Reaper, databases: Iterable[Path]) -> None:
        self.directory, self.reaper = directory, reaper
        self.clients: dict[int, ClientProcess] = {}
        self.selector = selectors.DefaultSelector()
        self._pauser = processes.ProcessPauser(databases, FREEZE_ATTEMPTS)

    def start(self, spec: ClientSpec) -> ClientProcess:
        """Start the client process ``spec`` describes."""
        with (self.directory / f"client-{spec.client}.log").open("ab") as log:
            proc = subprocess.Popen(  # noqa: S603 (an argument list built here, no shell)
                # the history path only names the run in ps; the settings go to stdin
                [sys.executable, "-m", "fencelock.check.workloads", spec.history],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                start_new_session=True,
            )
        self.reaper.watch(proc.pid)
        _send_spec(proc, spec)
        assert proc.stdout is not None
        os.set_blocking(proc.stdout.fileno(), False)
        client = ClientProcess(spec.client, proc)
        self.clients[spec.client] = client
        self.selector.register(proc.stdout, selectors.EVENT_READ, client)
        return client

    def go(self, c: ClientProcess, deadline: float) -> None:
        """Let ``c`` start its loop, to run until ``deadline``."""
        assert c.proc.stdin is not None
        with contextlib.suppress(OSError):
            c.proc.stdin.write(f"go {deadline!r}\n".encode())
            c.proc.stdin.flush()
        c.started = True

    def read(self, timeout: float) -> Iterator[tuple[ClientProcess, list[list[str]]]]:
        """The lines (split into words) each client said within ``timeout``.

        A client whose output ended is reaped on the way; one that ended before it
        was ready raises :class:`HarnessError`.
        """
        if not self.selector.get_map():
            time.sleep(timeout)
            return
        for key, _ in self.selector.select(timeout):
            c: ClientProcess = key.data
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
            yield c, [line.decode(errors="replace").split() for line in lines]

    def freeze(self, c: ClientProcess) -> bool:
        """SIGSTOP ``c`` outside any SQLite write transaction; False if it could not."""
        try:
            frozen = self._pauser.freeze(c.proc.pid)
        except ProcessLookupError:
            return False
        if frozen:
            c.frozen = True
        return frozen

    def thaw(self, c: ClientProcess) -> None:
        """SIGCONT ``c`` (unless it has exited)."""
        if c.proc.poll() is None:
            processes.resume(c.proc.pid)
        c.frozen = False

    def remove(self, c: ClientProcess) -> None:
        """Stop listening to ``c`` and kill it."""
        with contextlib.suppress(KeyError, ValueError):
            assert c.proc.stdout is not None
            self.selector.unregister(c.proc.stdout)
        self.kill(c)

    def kill(self, c: ClientProcess) -> None:
        """SIGKILL ``c``, reap it and close its pipes."""
        processes.kill(c.proc)
        for stream in (c.proc.stdin, c.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self.reaper.unwatch(c.proc.pid)
        c.done = True
        c.frozen = False

    def close(self) -> None:
        """Thaw, kill and reap every client process."""
        for c in self.clients.values():
            if not c.done or c.proc.poll() is None:
                self.kill(c)
        self.selector.close()
        self._pauser.close()

    def _ended(self, c: ClientProcess) -> None:
        assert c.proc.stdout is not None
        self.selector.unregister(c.proc.stdout)
        try:
            c.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.kill(c)
        self.reaper.unwatch(c.proc.pid)
        c.done = True
        if not c.ready:
            raise HarnessError(
                f"client {c.id} exited before it was ready (exit code {c.proc.returncode}): "
                + _tail(self.directory / f"client-{c.id}.log")
            )


def _send_spec(proc: subprocess.Popen[bytes], spec: ClientSpec) -> None:
    """The client's settings on its stdin, not its command line: any user can read that
    (``ps``), and the backend URL may hold a password."""
    assert proc.stdin is not None
    with contextlib.suppress(OSError):  # a client that died at once is noticed by read()
        proc.stdin.write(spec.to_json().encode() + b"\n")
        proc.stdin.flush()


def _tail(path: Path, size: int = 1500) -> str:
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return "(no log)"
    return text[-size:] or "(empty log)"
