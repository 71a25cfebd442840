"""A session shared by many leases (etcd's lease, ZooKeeper's session), as leases see it.

The backend owns the session and its I/O; it reports here what happened to it, and
every lease held in it hears at once: :meth:`SharedSession.suspend` (the connection is
gone, the session may still live: the leases are at risk, still trusted until their
safe time ends) and :meth:`SharedSession.end` (expired or revoked: the leases are lost).
No I/O and no clock reads here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from enum import Enum


class SessionNews(Enum):
    SUSPENDED = "suspended"
    ENDED = "ended"


Listener = Callable[[SessionNews, str], object]


class SharedSession:
    """Who listens to one backend session, and whether it has ended."""

    def __init__(self, label: str) -> None:
        self.label = label  # e.g. "etcd lease 694d7f3a1b2c": for messages
        self.ended_because: str | None = None
        self._guard = threading.Lock()
        self._listeners: dict[int, Listener] = {}
        self._next_id = 0

    def listen(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(news, reason)`` on each suspension and on the end; the
        returned function stops it. A session that ended already reports that now."""
        with self._guard:
            ended = self.ended_because
            if ended is None:
                key, self._next_id = self._next_id, self._next_id + 1
                self._listeners[key] = listener
        if ended is not None:
            listener(SessionNews.ENDED, ended)
            return lambda: None

        def stop() -> None:
            with self._guard:
                self._listeners.pop(key, None)

        return stop

    @property
    def listeners(self) -> int:
        return len(self._listeners)

    def suspend(self, reason: str) -> None:
        """The connection to the server is lost; the session may still be alive."""
        self._tell(SessionNews.SUSPENDED, reason)

    def end(self, reason: str) -> None:
        """The session expired or was revoked: whatever was held in it is gone. Once."""
        with self._guard:
            if self.ended_because is not None:
                return
            self.ended_because = reason
        self._tell(SessionNews.ENDED, reason)
        with self._guard:
            self._listeners.clear()

    def close(self, reason: str) -> None:
        """Ended with nobody told: the leases in it were released (or moved) first."""
        with self._guard:
            if self.ended_because is None:
                self.ended_because = reason
            self._listeners.clear()

    def _tell(self, news: SessionNews, reason: str) -> None:
        with self._guard:
            listeners = list(self._listeners.values())
        for listener in listeners:
            listener(news, reason)
