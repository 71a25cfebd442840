"""One Redlock node's connection for the lock scripts: pipelined, no task per request.

A request is written to the socket at once and its reply handed to a callback when
it arrives. Redis answers a connection's requests in the order they were sent, so
a FIFO of callbacks matches replies to requests. One timer per connection enforces
the per-node timeout: a request unanswered for that long fails, and with it every
other request on the connection, which is then closed; the next request opens a
new one. A node that could not be connected to (refused, wrong password, TLS
failure) is reported unavailable at once for :data:`RECONNECT_AFTER` seconds
rather than dialled again on every request.

Every request gets exactly one answer: the reply (an error reply is a
:class:`ReplyError` value) or a :class:`BackendUnavailable` naming the node.

A link given ``on_push`` serves pub/sub: the messages of its subscriptions go there
(they answer no request), and ``on_end`` learns when a connection, and with it
every subscription, is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import ssl
from collections import deque
from collections.abc import Callable, Sequence

from fencelock.aio import within
from fencelock.backends.redis.errors import not_connected, refused, unreachable
from fencelock.backends.redis.options import RedisOptions
from fencelock.backends.redis.resp import ProtocolError, RawReply, ReplyError, ReplyParser, Script
from fencelock.backends.redlock.setup import gate_commands, tls_context
from fencelock.errors import BackendUnavailable

RECONNECT_AFTER = 0.1

Done = Callable[[RawReply], None]
Push = Callable[[list[RawReply]], None]
End = Callable[[BackendUnavailable], None]
# (deadline on the loop's clock, callback, script to load on NOSCRIPT, packed command)
_Request = tuple[float, Done, Script | None, bytes]


def _ignore(reply: RawReply) -> None:
    pass


class NodeLink:
    """Requests to one node, over one connection made on first use and after a loss."""

    def __init__(
        self,
        options: RedisOptions,
        preload: Sequence[Script] = (),
        on_push: Push | None = None,
        on_end: End | None = None,
    ) -> None:
        self.options = options
        self.where = options.where
        self.timeout = options.timeout
        self.preload = tuple(preload)
        self.on_push, self._on_end = on_push, on_end
        self._conn: _Connection | None = None
        self._down: BackendUnavailable | None = None
        self._down_until = -math.inf
        self._tls: ssl.SSLContext | None = None
        self._closed: BackendUnavailable | None = None

    def send(self, command: bytes, done: Done, script: Script | None = None) -> None:
        """Write ``command`` now (or once connected); ``done`` gets its one answer.

        ``script``: the script ``command`` runs with EVALSHA; if the node does not
        know it (NOSCRIPT), it is loaded and the command sent once more.
        """
        conn = self._conn
        if conn is None:
            if self._closed is not None:
                done(self._closed)
                return
            loop = asyncio.get_running_loop()
            if self._down is not None and loop.time() < self._down_until:
                done(self._down)
                return
            conn = self._conn = _Connection(self, loop)
        conn.send(command, done, script)

    def tls_context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = tls_context(self.options)
        return self._tls

    def ended(self, conn: _Connection, error: BackendUnavailable, refused: bool) -> None:
        """``conn`` is finished; after a refused connection, hold off reconnecting."""
        if self._conn is conn:
            self._conn = None
        if refused:
            self._down, self._down_until = error, conn.loop.time() + RECONNECT_AFTER
        if self._on_end is not None:
            self._on_end(error)

    async def close(self) -> None:
        """Close the connection; requests still unanswered fail."""
        self._closed = BackendUnavailable(f"{self.where}: the client was closed")
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close(self._closed)


def _is_push(reply: RawReply) -> bool:
    """True for a message of a subscription (RESP2: an array that starts with its kind)."""
    return isinstance(reply, list) and bool(reply) and reply[0] in (b"message", b"pmessage")


class _Connection(asyncio.Protocol):
    """One TCP (or TLS) connection: pipelined requests, replies matched in order."""

    def __init__(self, link: NodeLink, loop: asyncio.AbstractEventLoop) -> None:
        self.link, self.loop = link, loop
        self._transport: asyncio.Transport | None = None
        self._parser = ReplyParser()
        self._sent: deque[_Request] = deque()  # written, replies not yet read
        self._held: list[_Request] = []  # waiting for the connection to be ready
        self._ready = False
        self._gates = 0
        self._error: BackendUnavailable | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._opener: asyncio.Task[None] | None = loop.create_task(self._open())

    def send(self, command: bytes, done: Done, script: Script | None) -> None:
        request = (self.loop.time() + self.link.timeout, done, script, command)
        if self._ready:
            self._transport.write(command)  # type: ignore[union-attr]
            self._sent.append(request)
        else:
            self._held.append(request)
        if self._timer is None:
            self._timer = self.loop.call_at(request[0], self._check_deadlines)

    # -- opening ----------------------------------------------------------------------

    async def _open(self) -> None:
        options = self.link.options
        try:
            tls = self.link.tls_context() if options.tls else None
            await within(
                options.connect_timeout,
                self.loop.create_connection(
                    lambda: self,
                    options.host,
                    options.port,
                    ssl=tls,
                    server_hostname=options.host if tls is not None else None,
                ),
            )
        except Exception as exc:  # any failure to connect is this node's, said plainly
            error = (
                exc if isinstance(exc, BackendUnavailable) else unreachable(self.link.where, exc)
            )
            self._fail(error, refused=True)
            return
        finally:
            self._opener = None
        if self._error is not None:  # failed (timed out, closed) while connecting
            if self._transport is not None:
                self._transport.abort()
            return
        self._start()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def _start(self) -> None:
        """Authenticate and select the database; only then run scripts."""
        gates = gate_commands(self.link.options)
        if not gates:
            self._go()
            return
        self._gates = len(gates)
        deadline = self.loop.time() + self.link.timeout
        for command in gates:
            self._sent.append((deadline, self._on_gate, None, command))
        self._transport.write(b"".join(gates))  # type: ignore[union-attr]

    def _on_gate(self, reply: RawReply) -> None:
        if self._error is not None:
            return
        if isinstance(reply, ReplyError):
            self._fail(refused(self.link.where, reply.text), refused=True)
            return
        self._gates -= 1
        if self._gates == 0:
            self._go()

    def _go(self) -> None:
        now = self.loop.time()
        deadline = now + self.link.timeout
        parts = []
        for script in self.link.preload:  # saves a NOSCRIPT round trip on a fresh node
            parts.append(script.load_command)
            self._sent.append((deadline, self._on_preload, None, script.load_command))
        held, self._held = self._held, []
        stale = []
        for request in held:
            if request[0] <= now:  # its time is up (nobody ran the loop): never send it
                stale.append(request)
                continue
            parts.append(request[3])
            self._sent.append(request)
        self._ready = True
        self._transport.write(b"".join(parts))  # type: ignore[union-attr]
        if stale:
            late = BackendUnavailable(
                f"cannot reach {self.link.where}: no connection within {self.link.timeout:g}s"
            )
            for request in stale:
                self._answer(request[1], late)

    # -- replies ----------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        try:
            replies = self._parser.feed(data)
        except (ProtocolError, ValueError) as exc:
            self._fail(BackendUnavailable(f"{self.link.where} sent an unreadable reply: {exc}"))
            return
        sent, on_push = self._sent, self.link.on_push
        for reply in replies:
            if on_push is not None and _is_push(reply):
                on_push(reply)
                continue
            if not sent:
                # A server that turns the connection away (e.g. at maxclients) says why
                # before it is asked anything, then closes it.
                self._fail(self._unasked(reply), refused=isinstance(reply, ReplyError))
                return
            deadline, done, script, command = sent.popleft()
            if (
                script is not None
                and isinstance(reply, ReplyError)
                and reply.text.startswith("NOSCRIPT")
            ):
                # The script never ran, so sending it again is safe.
                sent.append((deadline, _ignore, None, script.load_command))
                sent.append((deadline, done, None, command))
                self._transport.write(script.load_command + command)  # type: ignore[union-attr]
                continue
            self._answer(done, reply)

    def _on_preload(self, reply: RawReply) -> None:
        if isinstance(reply, ReplyError):
            self._fail(refused(self.link.where, reply.text), refused=True)

    def _unasked(self, reply: RawReply) -> BackendUnavailable:
        if isinstance(reply, ReplyError):
            return refused(self.link.where, reply.text)
        return BackendUnavailable(f"{self.link.where} sent a reply nobody asked for")

    def _answer(self, done: Done, reply: RawReply) -> None:
        try:
            done(reply)
        except Exception as exc:  # a bug in one callback must not break the connection
            self.loop.call_exception_handler(
                {
                    "message": f"fencelock: reply handler for {self.link.where} failed",
                    "exception": exc,
                }
            )

    # -- failure ----------------------------------------------------------------------

    def _check_deadlines(self) -> None:
        self._timer = None
        # Every request, not just each queue's head: a request re-sent after NOSCRIPT
        # keeps its deadline but queues behind newer ones.
        deadlines = [request[0] for queue in (self._sent, self._held) for request in queue]
        if not deadlines:
            return
        oldest = min(deadlines)
        if oldest > self.loop.time():
            self._timer = self.loop.call_at(oldest, self._check_deadlines)
            return
        where, timeout = self.link.where, self.link.timeout
        if self._transport is None:
            self._fail(not_connected(where, timeout, self.link.options.tls), refused=True)
        else:
            self._fail(BackendUnavailable(f"{where} did not answer within {timeout:g}s"))

    def eof_received(self) -> None:
        # At once, not at connection_lost: a request sent in between would be lost too.
        self.connection_lost(None)

    def connection_lost(self, exc: Exception | None) -> None:
        reason = exc if exc is not None else "closed by the server"
        error = BackendUnavailable(f"lost the connection to {self.link.where}: {reason}")
        self._fail(error, refused=not self._ready)

    def _fail(self, error: BackendUnavailable, refused: bool = False) -> None:
        """Close the connection and give ``error`` to every request still unanswered."""
        if self._error is not None:
            return
        self._error, self._ready = error, False
        self.link.ended(self, error, refused)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        opener = self._opener
        if opener is not None and opener is not asyncio.current_task():
            opener.cancel()
        if self._transport is not None:
            self._transport.abort()
        requests = [*self._sent, *self._held]
        self._sent.clear()
        self._held.clear()
        for request in requests:
            self._answer(request[1], error)

    async def close(self, error: BackendUnavailable) -> None:
        opener = self._opener
        self._fail(error)
        if opener is not None:
            with contextlib.suppress(BaseException):
                await opener
        await asyncio.sleep(0)  # lets the transport close its socket
