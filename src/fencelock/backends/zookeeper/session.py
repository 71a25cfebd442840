"""One ZooKeeper session (a kazoo client), shared by every lease of one TTL.

kazoo keeps the session alive with its own pings; what fencelock adds is a time it
can trust: :meth:`ZkSession.fresh` sends a probe unless one answered recently
enough, and callers at the same time share it. The session's state changes
(SUSPENDED: the connection is gone, LOST: the session expired) are pushed into
every lease held in it, and a watch on each of its own nodes reports a deletion.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
from collections.abc import Callable, Iterator
from typing import Any

from kazoo.client import KazooClient
from kazoo.protocol.states import EventType, KazooState, KeeperState, WatchedEvent

from fencelock import blocking_call, clock
from fencelock.aio import within
from fencelock.backends import idle_watch
from fencelock.backends.zookeeper.bridge import (
    LoopHandler,
    QuietOnClose,
    SessionLost,
    on_loop,
    outcome,
)
from fencelock.backends.zookeeper.options import ZooKeeperOptions
from fencelock.engine.session import SessionNews, SharedSession
from fencelock.errors import BackendUnavailable, ConfigError

# How soon a delete whose reply was lost is sent again.
RETRY_DELETE = 0.5
# How long kazoo's connection thread may take to end once its connections are cut (it
# looks at its client's stop every 0.1 s between tries): a close waits no longer.
AFTER_CUT = 1.0


class Watch:
    """A ZooKeeper watch and its session's news, as one event: a waiter sets
    ``callback`` as a read's watch, then awaits :meth:`fired`."""

    def __init__(self, news: SharedSession) -> None:
        self.event = asyncio.Event()
        self.woken = threading.Event()  # set from any thread, before the waiter awaits
        self.deleted = False  # what fired was the watched node's deletion,
        self.changed = False  # ... or a write of its data,
        self.touched = False  # ... or a change at what :meth:`touch_callback` watches
        self._on_loop = False  # a waiter awaits ``event`` on the loop
        self._loop = asyncio.get_running_loop()
        self._stop = news.listen(lambda _news, _why: self.wake())

    def wake(self) -> None:  # on any thread
        self.woken.set()
        if self._on_loop:
            on_loop(self._loop, self.event.set)

    def callback(self, event: WatchedEvent) -> None:  # on kazoo's thread
        self.deleted = self.deleted or event.type == EventType.DELETED
        self.changed = self.changed or event.type == EventType.CHANGED
        self.wake()

    def touch_callback(self, _event: WatchedEvent) -> None:  # on kazoo's thread
        """A second watch's callback: it sets ``touched`` (and wakes the waiter)."""
        self.touched = True
        self.wake()

    def rearm(self) -> None:
        """Forget what fired, to wait on a watch set again."""
        self.event.clear()
        self.woken.clear()
        self.deleted = self.changed = self.touched = False

    async def fired(self, timeout: float | None) -> None:
        """Until the watch fires, the session has news, or ``timeout`` passes."""
        # ``wake`` sets ``event`` from here on; one that came before set ``woken``.
        self._on_loop = True
        if self.woken.is_set():
            return
        with contextlib.suppress(TimeoutError):
            await within(timeout, self.event.wait())

    def close(self) -> None:
        self._stop()


class ZkSession:
    """A kazoo client with a session of ``timeout`` seconds asked (``negotiated``: what
    the server granted), and the nodes it holds locks with."""

    def __init__(self, options: ZooKeeperOptions, timeout: int, where: str) -> None:
        self.options, self.where = options, where
        self.loop = asyncio.get_running_loop()
        self._handler = LoopHandler(options.connect_timeout)
        self._log = QuietOnClose()
        self.client = KazooClient(
            hosts=options.hosts,
            timeout=float(timeout),
            auth_data=options.auth_data or None,
            handler=self._handler,
            logger=self._log,
        )
        self.negotiated = 0.0
        self._granted = threading.Event()  # set once the session's setup is complete
        self._settled = asyncio.Event()  # on the loop: set up, or being stopped
        self._stopping = _Stopping(self.client, self._handler, self._log)
        self._capture_negotiated_timeout()
        self.news = SharedSession(f"ZooKeeper session of {timeout}s")
        self.session_id: int | None = None
        self.confirmed_at = -math.inf  # when the last answered request was sent
        self._probe: asyncio.Task[None] | None = None
        self.mine: set[str] = set()  # paths of this session's contender nodes, watched
        self._watches: set[Watch] = set()  # waiters waiting now, told of state changes
        self._closing: threading.Timer | None = None
        self.gone: set[str] = set()  # of those, the ones a watch saw deleted
        # each held node's own news: its session's, and its deletion by someone else
        self._node_news: dict[str, tuple[SharedSession, Callable[[], None]]] = {}

    def _capture_negotiated_timeout(self) -> None:
        """kazoo keeps the session timeout the server granted to itself: it reads
        for two thirds of it. Learn it there (the one reach into kazoo's insides).

        kazoo says "connected" (and ``start`` returns) before it sends the URL's
        credentials, and only then returns the timeout: :meth:`start` waits for it."""
        handler: Any = self.client._connection
        connect = handler._connect

        def capturing(*args: Any) -> Any:
            read_timeout, connect_timeout = connect(*args)
            self.negotiated = read_timeout * 1.5 / 1000.0
            self._granted.set()
            on_loop(self.loop, self._settled.set)
            return read_timeout, connect_timeout

        handler._connect = capturing

    async def start(self) -> None:
        """Connect (kazoo connects on a thread of its own); a fencelock error if the
        session is not set up within the connect timeout, its connection given up."""
        sent = clock.now()
        self.client.start_async()
        limit = self.options.connect_timeout
        with contextlib.suppress(TimeoutError):  # on the loop: no thread is left waiting
            await within(limit, self._settled.wait())
        if not self._granted.is_set():
            reached = self.client.connected or self.client.client_state == KeeperState.AUTH_FAILED
            await self.stop()
            if reached:  # kazoo says "connected" before the credentials are answered
                raise BackendUnavailable(
                    f"{self.where}: the ZooKeeper session was not set up within "
                    f"{limit:g}s (were the URL's credentials refused?)"
                )
            raise BackendUnavailable(
                f"ZooKeeper at {self.where} unreachable: no server answered in time"
            )
        self.session_id = self.client.client_id[0] if self.client.client_id else None
        self.confirmed_at = sent
        self.client.add_listener(self._state_changed)

    @property
    def ended(self) -> bool:
        return self.news.ended_because is not None

    def check_granted(self, ttl: float) -> None:
        """A lease may trust no longer than the server keeps the session without news."""
        if self._outlasts(ttl):
            raise ConfigError(
                f"{self.where}: ZooKeeper granted a session timeout of {self.negotiated:g}s "
                f"for a lock TTL of {ttl:g}s (the servers' maxSessionTimeout is lower); use "
                "a TTL no longer than that, or raise maxSessionTimeout on the servers"
            )

    def check_extends(self, ttl: float) -> None:
        """An extend may not outlast the session the lease's node belongs to."""
        if self._outlasts(ttl):
            raise ConfigError(
                f"{self.where}: cannot extend to {ttl:g}s a lease held in a ZooKeeper "
                f"session of {self.negotiated:g}s: its node belongs to that session, and the "
                "servers free it after that long without news; acquire with the longer TTL"
            )

    def _outlasts(self, ttl: float) -> bool:
        """Whether ``ttl`` is longer than the session lasts without news (to a rounding)."""
        return self.negotiated + 1e-9 < ttl

    async def call(self, result: Any) -> Any:
        """A kazoo ``*_async`` result's value, checked against this session ending."""
        if self.ended:
            raise SessionLost(str(self.news.ended_because))
        try:
            return await outcome(result, self.options.timeout, self.where)
        except SessionLost:
            # Ended now, not when kazoo's LOST reaches the loop: a blocking client runs
            # it only inside calls, and the next try must not be given this session again.
            self.end("expired: a request was refused with its session")
            raise

    async def fresh(self, max_age: float) -> float:
        """When a request that the server answered in this session was sent, not longer
        ago than ``max_age``; probes if needed. Raises :class:`SessionLost`."""
        asked = clock.now()
        while True:
            if self.ended:
                raise SessionLost(str(self.news.ended_because))
            if asked - self.confirmed_at <= max_age:
                return self.confirmed_at
            await blocking_call.onto_the_loop()  # a probe is sent and awaited on the loop
            if self._probe is None or self._probe.done():
                self._probe = self.loop.create_task(self._send_probe())
            await asyncio.shield(self._probe)

    async def _send_probe(self) -> None:
        sent = clock.now()
        await self.call(self.client.exists_async("/"))
        self.confirmed(sent)

    def confirmed(self, sent: float) -> None:
        """A request sent at ``sent`` was answered in this very session."""
        current = self.client.client_id[0] if self.client.client_id else None
        if current != self.session_id:  # kazoo moved on to a new session after a loss
            self.end("expired (the client reconnected with a new session)")
            raise SessionLost(str(self.news.ended_because))
        self.confirmed_at = max(self.confirmed_at, sent)

    async def watch_mine(self, path: str) -> None:
        """Hear of the deletion of our node ``path`` (an operator, a thief) without asking;
        a node already gone is marked at once."""
        self.mine.add(path)
        if await self.call(self.client.exists_async(path, watch=self._node_changed)) is None:
            self.gone.add(path)

    def delete_eventually(self, path: str, record: tuple[str, bytes] | None = None) -> None:
        """Delete our node ``path`` (and set ``record``'s node to its data, in the same
        step) once the servers can be reached again, retrying on kazoo's own threads
        while this session lives: a release whose reply was lost must not leave the
        lock held by a node nobody owns any more (the stuck lock of kazoo #732)."""

        def attempt() -> None:
            if self.ended:
                return  # the node went with the session
            transaction = self.client.transaction()
            transaction.delete(path)
            if record is not None:
                transaction.set_data(*record)
            transaction.commit_async().rawlink(settled)

        def settled(result: Any) -> None:  # on kazoo's connection thread
            try:
                result.get_nowait()  # a failed step (the node is gone) is an answer too
            except Exception:  # not answered: the connection is down; again, later
                retry = threading.Timer(RETRY_DELETE, attempt)
                retry.daemon = True
                retry.start()

        attempt()

    def holds(self, path: str) -> bool:
        return path in self.mine and path not in self.gone

    @contextlib.contextmanager
    def watching(self) -> Iterator[Watch]:
        """A :class:`Watch` on this session, its news listener removed on leaving."""
        watch = Watch(self.news)
        self._watches.add(watch)
        try:
            yield watch
        finally:
            self._watches.discard(watch)
            watch.close()

    def news_of(self, path: str) -> SharedSession:
        """The news a lease held by node ``path`` listens to: the session's suspension
        and end, and the node's deletion by someone else (once :meth:`watch_mine` has set
        its watch), each the moment it is known."""
        node = SharedSession(f"ZooKeeper node {path}")

        def follow(news: SessionNews, why: str) -> None:
            if news is SessionNews.SUSPENDED:
                node.suspend(why)
            else:
                node.end(why)

        self._node_news[path] = (node, self.news.listen(follow))
        return node

    def let_go(self, path: str) -> None:
        """Our own release or keep of ``path`` is under way: its deletion is no news."""
        self.mine.discard(path)
        self.gone.discard(path)
        node = self._node_news.pop(path, None)
        if node is not None:
            news, stop = node
            stop()
            news.close("released")

    def _node_changed(self, event: WatchedEvent) -> None:  # on kazoo's connection thread
        if event.type == EventType.DELETED:
            on_loop(self.loop, self._deleted, event.path)
            idle_watch.wake(self.loop)  # heard now, not at the next call
        elif event.type == EventType.CHANGED and not self.ended:  # a watch fires once
            self.client.exists_async(event.path, watch=self._node_changed)

    def _deleted(self, path: str) -> None:
        if path in self.mine:
            self.gone.add(path)
            node = self._node_news.get(path)
            if node is not None:
                node[0].end(f"its node {path} was deleted by another client (a forced release?)")

    def _state_changed(self, state: str) -> None:  # on kazoo's connection thread
        for watch in list(self._watches):  # a stepped waiter hears it now, not via the loop
            watch.wake()
        if state == KazooState.SUSPENDED:
            on_loop(self.loop, self._suspended)
        elif state == KazooState.LOST:
            on_loop(self.loop, self.end, "expired: its leases' nodes are gone")
        idle_watch.wake(self.loop)  # the leases hear it now, not at the next call

    def _suspended(self) -> None:
        if not self.ended:
            self.news.suspend(f"the connection to ZooKeeper ({self.where}) was lost")

    def end(self, why: str) -> None:
        self.news.end(f"ZooKeeper session {self.session_id or 0:x} {why}")

    def close_after(self, seconds: float) -> None:
        """Close the session ``seconds`` from now, on a timer thread: the event loop of a
        blocking client runs only while it is called, and the lease must end anyway."""
        if self._closing is not None:
            self._closing.cancel()
        self._closing = threading.Timer(seconds, self._stopping.run, (self._grace(),))
        self._closing.daemon = True
        self._closing.start()

    async def stop(self, why: str | None = "was closed by its client") -> None:
        """Close the session: its nodes go at once, and ``why`` to the leases still in it
        (None: they were released; nobody hears). Within the request timeout: a server
        that does not answer the close has its connection cut."""
        if why is None:
            self.news.close(f"ZooKeeper session {self.session_id or 0:x} closed")
        else:
            self.end(why)
        if self._closing is not None:
            self._closing.cancel()
        self._settled.set()  # a start still waiting gives up now
        await blocking_call.onto_the_loop()
        await asyncio.to_thread(self._stopping.run, self._grace())

    def _grace(self) -> float:
        """How long the server is given to answer the close: none for a session never
        set up (nothing on the server to close), else one request's time."""
        return self.options.timeout if self._granted.is_set() else 0.0


class _Stopping:
    """kazoo's ``stop()`` and ``close()``, run once on a thread of their own, waited for
    by every caller within a bound: past it, the client's connections are cut."""

    def __init__(self, client: KazooClient, handler: LoopHandler, log: QuietOnClose) -> None:
        self._client, self._handler, self._log = client, handler, log
        self._started = False
        self._guard = threading.Lock()
        self._done = threading.Event()

    def run(self, grace: float) -> None:
        """Stop the client; wait up to ``grace`` for kazoo to close the session with the
        server, then cut its connections and wait :data:`AFTER_CUT` at most."""
        with self._guard:
            first, self._started = not self._started, True
        if first:
            self._log.quiet()  # what kazoo says from here on is about this close
            threading.Thread(target=self._stop, name="fencelock-zk-stop", daemon=True).start()
        if not self._done.wait(grace):
            self._handler.cut()
            self._done.wait(AFTER_CUT)

    def _stop(self) -> None:
        try:
            with contextlib.suppress(Exception):
                self._client.stop()
            with contextlib.suppress(Exception):  # not stopped in time: left to the process
                self._client.close()
        finally:
            self._done.set()
