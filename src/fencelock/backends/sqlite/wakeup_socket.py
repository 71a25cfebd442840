"""Cross-process wake-ups for waiters on one host: a datagram socket per waiter.

A waiter binds a Unix datagram socket (in Linux's abstract namespace, so nothing
is left on disk when the process dies) and records its address next to the lock.
A releaser sends one byte to every recorded address. ``recv`` with a timeout
gives a wait that wakes within microseconds of a release, with no polling.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import select
import socket
import sys
import tempfile

from fencelock import forking

_ABSTRACT = sys.platform.startswith("linux")


def _new_address() -> bytes:
    name = "fencelock-" + secrets.token_hex(8)
    if _ABSTRACT:
        return b"\0" + name.encode()
    return os.path.join(tempfile.gettempdir(), name).encode()


class WakeupSocket:
    """One waiter's socket: ``wait`` returns when rung or after the timeout."""

    def __init__(self) -> None:
        self.address = _new_address()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.bind(self.address)
        forking.register(self)

    def _reset_after_fork(self) -> None:
        """In a forked child: drop its copy of the parent's waiter's socket (no shutdown,
        which would reach the parent's), so a ring fails once that waiter is gone."""
        self._sock.close()

    def wait(self, timeout: float, also: int | None = None) -> bool:
        """True if rung before ``timeout`` seconds passed, or ``also`` (a file
        descriptor: a holder's pidfd) became readable; drains extra rings."""
        if also is not None:
            with contextlib.suppress(OSError, ValueError):
                ready, _, _ = select.select([self._sock.fileno(), also], [], [], max(timeout, 0.0))
                if also in ready and self._sock.fileno() not in ready:
                    return True
        try:
            self._sock.settimeout(max(timeout, 0.0) if also is None else 0.0)
            self._sock.recv(16)
        except (TimeoutError, BlockingIOError):
            return False
        except OSError:
            return False  # closed by another thread: the attempt was abandoned
        self._drain()
        return True

    def ring_itself(self) -> None:
        """Wake this socket's waiter (from any thread)."""
        with contextlib.suppress(OSError):
            self._sock.sendto(b"!", self.address)

    def _drain(self) -> None:
        self._sock.setblocking(False)
        with contextlib.suppress(OSError):
            while self._sock.recv(16):
                pass

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        if not _ABSTRACT:
            with contextlib.suppress(OSError):
                os.unlink(self.address)


class WakeupSender:
    """Sends the wake-up byte; reports addresses whose waiter is gone."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.setblocking(False)

    def ring(self, address: bytes) -> bool:
        """False if nobody listens at ``address`` any more (the waiter died)."""
        try:
            self._sock.sendto(b"!", address)
        except BlockingIOError:
            return True  # its queue is full of rings already: it will wake
        except (ConnectionRefusedError, FileNotFoundError):
            return False
        except OSError:
            return True
        return True

    def close(self) -> None:
        self._sock.close()
