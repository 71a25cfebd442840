"""What starting a throwaway server needs: a free port, its program, a fake wall clock.

A missing program raises :class:`ToolMissing` naming the Debian package that has it
(``scripts/install-servers.sh`` installs them all), never a silent skip.
"""

from __future__ import annotations

import glob
import random
import shutil
import socket
from pathlib import Path

from fencelock.errors import BackendUnavailable

LOOPBACK = "127.0.0.1"
SBIN = Path("/usr/sbin")  # where Debian puts daemons: not on a user's PATH


class ToolMissing(BackendUnavailable):
    """A program or library a throwaway server needs is not installed; names the package."""


class ServerStartError(BackendUnavailable):
    """A throwaway server exited at start or did not become ready; carries its log's tail."""


# Ports handed out by this process: never twice, though the first server let it go.
_HANDED_OUT: set[int] = set()
_LOWEST = 10000


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago, from below the kernel's
    ephemeral range: a port the kernel picked (``bind(0)``) may be given to an outgoing
    connection before the server that was to take it starts (a ZooKeeper member then
    exits with "Address already in use")."""
    ephemeral_low = _ephemeral_low()
    for _ in range(200):
        port = random.randrange(_LOWEST, ephemeral_low)  # noqa: S311 (a port to try)
        if port in _HANDED_OUT:
            continue
        with socket.socket() as sock:
            try:
                sock.bind((LOOPBACK, port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    with socket.socket() as sock:  # a crowded range: the kernel's pick, as before
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def _ephemeral_low() -> int:
    """The lowest port the kernel gives outgoing connections (32768 if unreadable)."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768
    return low if low > _LOWEST + 1000 else 32768


def require_binary(name: str, package: str | None = None) -> str:
    """The path of program ``name``, or ToolMissing naming the Debian package to install."""
    path = shutil.which(name)
    if path is None:
        raise ToolMissing(
            f"{name} is not installed: apt-get install {package or name} "
            "(scripts/install-servers.sh installs every server the tests use)"
        )
    return path


def _first(patterns: list[str]) -> str | None:
    for pattern in patterns:
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return None


def faketime_preload() -> str:
    """``LD_PRELOAD`` for a server whose wall clock can be stepped (libfaketime).

    Debian's redis-server uses jemalloc, which deadlocks under libfaketime at
    start-up; preloading glibc's malloc (``libc_malloc_debug.so.0``) first
    keeps jemalloc from initialising.
    """
    faketime = _first(
        [
            "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
            "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
            "/usr/lib/*/faketime/libfaketime.so.1",
            "/usr/lib/faketime/libfaketime.so.1",
        ]
    )
    if faketime is None:
        raise ToolMissing(
            "the clock nemesis needs libfaketime (libfaketime.so.1): "
            "apt-get install libfaketime faketime"
        )
    malloc = _first(
        [
            "/usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0",
            "/usr/lib/aarch64-linux-gnu/libc_malloc_debug.so.0",
            "/lib/*/libc_malloc_debug.so.0",
            "/usr/lib/*/libc_malloc_debug.so.0",
        ]
    )
    if malloc is None:
        raise ToolMissing(
            "the clock nemesis needs glibc's libc_malloc_debug.so.0 (glibc >= 2.34, "
            "package libc6) to run redis-server under libfaketime"
        )
    return f"{malloc} {faketime}"


class FakeClock:
    """A server's wall clock, offset by libfaketime from a file it re-reads on every call.

    Monotonic clocks stay real, as after an NTP step. The offset survives restarts
    of the server (the file stays).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0.0

    def environment(self) -> dict[str, str]:
        """The variables that put a process under this clock (writes the file first)."""
        self._write()
        return {
            "LD_PRELOAD": faketime_preload(),
            "FAKETIME_TIMESTAMP_FILE": str(self.path),
            "FAKETIME_NO_CACHE": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        }

    def step(self, seconds: float) -> float:
        """Step the clock forward by ``seconds``; the total offset now."""
        self.offset += seconds
        self._write()
        return self.offset

    def _write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(f"{self.offset:+.3f}\n")
        tmp.replace(self.path)  # libfaketime re-reads it on every call: no torn reads
