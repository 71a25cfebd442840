"""Sockets that must be read the moment something arrives, even while no call runs.

On ``mysql://`` and ``postgresql+advisory://`` a lock ends with its connection, and the
server hands it to a waiter at once: the holder must hear of a closed connection within
milliseconds, not at its next renewal. An asyncio client's own loop reads the socket
as soon as anything arrives. The blocking client's shared loop
(:mod:`fencelock.backends.shared_loop`) runs only inside calls, so between them a
:class:`SocketWatcher` thread waits on the sockets of held leases (epoll, edge-triggered:
one wake-up per arrival, never a spin) and, when one has news, runs the loop for a
turn: the backend's reader sees the end there, in the loop, as it would in asyncio.

Backends call :func:`watch` and :func:`unwatch` with their loop; on a loop that is not a
shared one they do nothing. Linux only (epoll); elsewhere the renewal notices, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import threading
import weakref
from collections.abc import Callable

# epoll's events for "something arrived, or the peer hung up"; edge-triggered
_EVENTS = (
    getattr(select, "EPOLLIN", 0) | getattr(select, "EPOLLRDHUP", 0) | getattr(select, "EPOLLET", 0)
)

_watchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, SocketWatcher] = (
    weakref.WeakKeyDictionary()
)


def attach(loop: asyncio.AbstractEventLoop, turn: Callable[[], None]) -> SocketWatcher | None:
    """Give ``loop`` (run only inside calls) a watcher that calls ``turn()`` to run it
    for a moment; None where epoll is missing."""
    if not hasattr(select, "epoll"):
        return None
    watcher = SocketWatcher(turn)
    _watchers[loop] = watcher
    return watcher


def watch(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    """Have ``loop`` read ``fd`` as soon as anything arrives on it, running or not."""
    watcher = _watchers.get(loop)
    if watcher is not None:
        watcher.add(fd)


def wake(loop: asyncio.AbstractEventLoop) -> None:
    """From any thread: have ``loop`` run a turn soon, running or not, for news a
    driver's own thread handed it (``call_soon_threadsafe``: a ZooKeeper watch)."""
    watcher = _watchers.get(loop)
    if watcher is not None:
        watcher.wake()


def unwatch(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    """Stop :func:`watch`'s watching of ``fd`` (before it is closed or reused)."""
    watcher = _watchers.get(loop)
    if watcher is not None:
        watcher.remove(fd)


class SocketWatcher:
    """A thread that waits on the watched sockets and runs the loop when one has news.

    Started on the first :meth:`add`, stopped by :meth:`stop`. ``turn`` runs the loop
    for one pass: at once if no thread runs it, else by joining the thread that does.
    """

    def __init__(self, turn: Callable[[], None]) -> None:
        self._turn = turn
        self._guard = threading.Lock()
        self._fds: set[int] = set()
        self._epoll: select.epoll | None = None
        self._wake_r = self._wake_w = -1
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._woken = False

    def add(self, fd: int) -> None:
        with self._guard:
            if self._stopped:
                return
            # registered again even if known: a number closed unannounced and reused
            # names a new socket, which epoll has not seen
            epoll = self._start()
            try:
                epoll.register(fd, _EVENTS)
            except FileExistsError:  # an earlier fd of that number, closed unannounced
                epoll.modify(fd, _EVENTS)
            self._fds.add(fd)

    def wake(self) -> None:
        """Run a turn soon (on the watcher's thread)."""
        with self._guard:
            if self._stopped:
                return
            self._start()
            self._woken = True
            with contextlib.suppress(OSError):  # full: a wake-up is pending already
                os.write(self._wake_w, b"n")

    def remove(self, fd: int) -> None:
        with self._guard:
            if fd not in self._fds:
                return
            self._fds.discard(fd)
            if self._epoll is not None:
                with contextlib.suppress(OSError, ValueError):
                    self._epoll.unregister(fd)

    def stop(self) -> None:
        """End the thread (it closes its epoll); nothing is watched after this."""
        with self._guard:
            self._stopped = True
            self._fds.clear()
            if self._wake_w >= 0:
                with contextlib.suppress(OSError):
                    os.write(self._wake_w, b"x")

    def _start(self) -> select.epoll:
        if self._epoll is None:
            self._epoll = select.epoll()
            self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
            self._epoll.register(self._wake_r, select.EPOLLIN)
            self._thread = threading.Thread(
                target=self._run, args=(self._epoll,), name="fencelock-socket-watcher", daemon=True
            )
            self._thread.start()
        return self._epoll

    def _run(self, epoll: select.epoll) -> None:
        try:
            while True:
                events = epoll.poll()
                with self._guard:
                    if self._stopped:
                        return
                    news = self._woken or any(fd in self._fds for fd, _ in events)
                    self._woken = False
                    if any(fd == self._wake_r for fd, _ in events):
                        with contextlib.suppress(OSError):
                            os.read(self._wake_r, 4096)
                if news:
                    with contextlib.suppress(Exception):  # a closed client: nothing to run
                        self._turn()
        finally:
            with self._guard:
                epoll.close()
                for fd in (self._wake_r, self._wake_w):
                    with contextlib.suppress(OSError):
                        os.close(fd)
                self._wake_r = self._wake_w = -1
