"""Real lock servers for the tests: started on free loopback ports, stopped afterwards.

The binaries come from Debian packages (``scripts/install-servers.sh``, run by
``make test``); a missing one fails the test that needs it with the fix in the
message, never a silent skip.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def require(binary: str) -> str:
    path = shutil.which(binary)
    if path is None:
        raise RuntimeError(f"{binary} is not installed: run scripts/install-servers.sh (as root)")
    return path


class ServerProcess:
    """A server process with its log; pause/resume/kill for fault injection."""

    def __init__(self, name: str, argv: Sequence[str], workdir: Path, port: int) -> None:
        self.name, self.port, self.workdir = name, port, workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = workdir / f"{name}.log"
        self._argv = list(argv)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            self._argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.workdir,
            start_new_session=True,
        )
        self.wait_ready()

    def wait_ready(self, timeout: float = 15) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited at start:\n{self.log()}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2),
            ):
                if self.ready():
                    return
            time.sleep(0.02)
        raise RuntimeError(f"{self.name} not ready after {timeout}s:\n{self.log()}")

    def ready(self) -> bool:
        return True

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def pause(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.pid, signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.pid, signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


class RedisServer(ServerProcess):
    """``redis-server`` without persistence, on a free port."""

    def __init__(
        self, workdir: Path, *extra: str, port: int | None = None, name: str = "redis"
    ) -> None:
        port = port or free_port()
        argv = [
            require("redis-server"),
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(workdir),
            *extra,
        ]
        super().__init__(f"{name}-{port}", argv, workdir, port)
        self.extra = extra

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def ready(self) -> bool:
        if "--tls-port" in self.extra or "--requirepass" in self.extra or "--user" in self.extra:
            return True
        done = subprocess.run(
            [require("redis-cli"), "-p", str(self.port), "ping"],
            capture_output=True,
            text=True,
            check=False,
            timeout=5,
        )
        return done.stdout.strip() == "PONG"

    def cli(self, *args: str) -> str:
        done = subprocess.run(
            [require("redis-cli"), "-p", str(self.port), *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=10,
        )
        return done.stdout.strip()
