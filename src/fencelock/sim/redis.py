"""The real Redis backend (:class:`~fencelock.backends.redis.async_backend.AsyncRedisBackend`)
run against :class:`~fencelock.sim.redis_model.RedisModel`: its attempts, undo, queue,
wake-ups, renewals and releases are the real code, and so are its wire
(:class:`~fencelock.backends.redis.wire.AsyncWire`: a conversation per connection, a
timeout per call, NOSCRIPT handling) and its wake-up listener
(:class:`~fencelock.backends.redis.listener.AsyncWakeListener`).

What is simulated is redis-py beneath them: :class:`SimConnection` is a connection as
the wire uses it (``connect``, ``send_packed_command``, ``read_response``, ...) whose
bytes travel as messages to the model, and :class:`SimPubSub` is a pub/sub object as
the listener uses it (``subscribe``, ``get_message``, ``aclose``), which subscribes again
after a reconnection as redis-py's does. Each connection keeps its messages in order
both ways; a message lost on the way hangs the connection from there on (a connection
its client gives up on at its timeout), or breaks it if it is a subscriber's (both ends
learn it: the server drops the subscriber, the listener connects and subscribes again),
and a server restart resets every connection. Messages go over the simulated network
(:class:`NetworkTransport`) or straight to the model (:class:`DirectTransport`, for
holding the model to a real server).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from fencelock.aio import TIMEOUTS, within
from fencelock.backends.redis.async_backend import AsyncRedisBackend
from fencelock.backends.redis.listener import AsyncWakeListener
from fencelock.backends.redis.scripts import KEY_PREFIX
from fencelock.backends.redis.wire import AsyncWire
from fencelock.engine.urls import parse_url
from fencelock.sim.backend import REQUEST_BOUND
from fencelock.sim.network import Network
from fencelock.sim.redis_model import CONNECT, CommandError, Conn, RedisModel, Reply

M = TypeVar("M")


class Transport(Protocol):
    """How a client's connections reach the model."""

    def carry(
        self, client: int, to_server: bool, deliver: Callable[[], None], reliable: bool = False
    ) -> bool: ...

    def alive(self, client: int) -> bool: ...


class NetworkTransport:
    """Over the simulated network: delayed, perhaps lost, held while a client is paused."""

    def __init__(self, network: Network) -> None:
        self.network = network

    def carry(
        self, client: int, to_server: bool, deliver: Callable[[], None], reliable: bool = False
    ) -> bool:
        return self.network.carry(client, to_server, deliver, reliable)

    def alive(self, client: int) -> bool:
        return client not in self.network.dead


class DirectTransport:
    """Straight to the model: nothing lost, each message on the loop's next turn."""

    def carry(
        self, client: int, to_server: bool, deliver: Callable[[], None], reliable: bool = False
    ) -> bool:
        asyncio.get_running_loop().call_soon(deliver)
        return True

    def alive(self, client: int) -> bool:
        return True


@dataclass(frozen=True)
class Side:
    """Client ``client``'s way to ``model``."""

    model: RedisModel
    transport: Transport
    client: int


class _InOrder(Generic[M]):
    """One direction of a connection: messages numbered as sent, handed on in that
    order; a lost one holds back all after it (a connection that hangs)."""

    def __init__(self, handle: Callable[[M], None]) -> None:
        self._handle = handle
        self._sent = self._next = 0
        self._held: dict[int, M] = {}

    def ticket(self) -> int:
        number, self._sent = self._sent, self._sent + 1
        return number

    def arrive(self, number: int, message: M) -> None:
        self._held[number] = message
        while self._next in self._held:
            message = self._held.pop(self._next)
            self._next += 1
            self._handle(message)


def _error(text: str) -> ResponseError:
    """An error reply as redis-py raises it (its prefix gone, as its parser does)."""
    if text.startswith("NOSCRIPT "):
        return NoScriptError(text.removeprefix("NOSCRIPT "))
    return ResponseError(text.removeprefix("ERR "))


def _parse_commands(packed: bytes) -> list[list[str]]:
    """RESP arrays of bulk strings (what ``resp.pack`` makes) as their strings."""
    commands, pos = [], 0
    while pos < len(packed):
        end = packed.index(b"\r\n", pos)
        count, pos = int(packed[pos + 1 : end]), end + 2
        parts = []
        for _ in range(count):
            end = packed.index(b"\r\n", pos)
            size, pos = int(packed[pos + 1 : end]), end + 2
            parts.append(packed[pos : pos + size].decode())
            pos += size + 2
        commands.append(parts)
    return commands


class SimConnection:
    """A connection to the model as :class:`~fencelock.backends.redis.wire.AsyncWire`
    uses redis.asyncio's (``wire.AsyncConnection``): replies decoded to ``str`` (the
    backend's ``decode_responses=True``), an error reply raised as redis-py's error, a
    connection the server dropped as its ``ConnectionError``."""

    def __init__(self, side: Side, fragile: bool = False) -> None:
        self._side = side
        self._fragile = fragile  # a subscriber's: a message lost on it breaks it
        self.is_connected = False
        self.socket_timeout: float | None = None
        self._conn: Conn | None = None
        self._up: _InOrder[Sequence[str]] | None = None
        self._inbox: deque[Reply] = deque()
        self._news = asyncio.Event()
        self._broken = False

    def _open(self) -> Conn:
        """A new connection on the server's side, both ways numbered afresh."""
        side = self._side
        down: _InOrder[Reply] = _InOrder(lambda message: self._hear(conn, message))

        def send(message: Reply) -> bool:
            number = down.ticket()
            return side.transport.carry(side.client, False, lambda: down.arrive(number, message))

        def reset() -> None:
            side.transport.carry(side.client, False, lambda: self._hear_reset(conn), True)

        conn = Conn(side.client, send, reset, alive=lambda: side.transport.alive(side.client))
        self._conn, self._up = conn, _InOrder(lambda request: side.model.receive(conn, request))
        self._inbox.clear()
        self._broken = False
        return conn

    def _hear(self, conn: Conn, message: Reply) -> None:
        if conn is self._conn:
            self._inbox.append(message)
            self._news.set()

    def _hear_reset(self, conn: Conn) -> None:
        if conn is self._conn:
            self._broken = True
            self._news.set()

    def request(self, request: Sequence[str]) -> None:
        """Send ``request`` (a command's words) down the connection."""
        up, side = self._up, self._side
        if up is None or self._broken:
            raise RedisConnectionError("Error 104 while writing to socket: connection reset")
        number = up.ticket()
        if not side.transport.carry(side.client, True, lambda: up.arrive(number, request)):
            conn = self._conn
            if self._fragile and conn is not None:  # both ends learn that it broke
                side.model.close(conn)
                side.transport.carry(side.client, False, lambda: self._hear_reset(conn), True)

    async def next_message(self) -> Reply:
        """What the server sent next (read in order); ConnectionError once it dropped us."""
        while not self._inbox:
            if self._broken or self._conn is None:
                await self.disconnect()
                raise RedisConnectionError("Connection closed by server.")
            self._news.clear()
            await self._news.wait()
        return self._inbox.popleft()

    async def connect(self) -> None:
        """The handshake: one round trip (a paused server leaves it hanging)."""
        if self.is_connected:
            return
        self._open()
        try:
            self.request(CONNECT)
            await self.next_message()
        except BaseException:
            await self.disconnect()
            raise
        self.is_connected = True

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        if not self.is_connected:
            await self.connect()
        packed = command if isinstance(command, bytes) else b"".join(command)
        for words in _parse_commands(packed):
            self.request(words)

    async def read_response(self) -> Reply:
        reply = await self.next_message()
        if isinstance(reply, CommandError):
            raise _error(reply.text)
        return reply

    async def can_read(self) -> bool:
        return False  # never awaits: the wire's idle check stays off the loop's order

    async def disconnect(self, nowait: bool = False) -> None:
        conn, self._conn, self._up = self._conn, None, None
        self.is_connected, self._broken = False, False
        self._inbox.clear()
        if conn is not None:
            self._side.model.close(conn)


class SimPubSub:
    """A pub/sub object as the wake-up listener uses redis.asyncio's: ``subscribe``
    sends and returns, ``get_message`` reads (reconnecting, and subscribing again to
    every channel, after a dropped connection), ``aclose`` unsubscribes by closing."""

    def __init__(self, side: Side, timeout: float) -> None:
        self._link = SimConnection(side, fragile=True)
        self._timeout = timeout
        self.channels: list[str] = []

    async def _connect(self) -> None:
        try:
            await within(self._timeout, self._link.connect())
        except TIMEOUTS:
            raise RedisTimeoutError("Timeout connecting to server") from None
        if self.channels:
            self._link.request(["SUBSCRIBE", *self.channels])

    async def subscribe(self, *channels: str) -> None:
        if not self._link.is_connected:
            await self._connect()
        self._link.request(["SUBSCRIBE", *channels])
        self.channels += [channel for channel in channels if channel not in self.channels]

    async def get_message(
        self, ignore_subscribe_messages: bool = False, timeout: float | None = 0.0
    ) -> dict[str, Any] | None:
        if not self._link.is_connected:
            await self._connect()
        try:
            message = await within(timeout, self._link.next_message())
        except TIMEOUTS:
            return None
        kind, channel, data = message
        if kind == "subscribe" and ignore_subscribe_messages:
            return None
        return {"type": kind, "pattern": None, "channel": channel, "data": data}

    async def aclose(self) -> None:
        await self._link.disconnect()
        self.channels = []


class _Pool:
    """What the wire takes of a client's connection pool."""

    def __init__(self, side: Side, timeout: float) -> None:
        self._side = side
        self.connection_kwargs: dict[str, Any] = {"socket_timeout": timeout}

    def make_connection(self) -> SimConnection:
        return SimConnection(self._side)


class SimRedisClient:
    """What the backend takes of a ``redis.asyncio.Redis``: its pool, its pub/sub."""

    def __init__(self, side: Side, timeout: float) -> None:
        self._side, self._timeout = side, timeout
        self.connection_pool = _Pool(side, timeout)

    def pubsub(self) -> SimPubSub:
        return SimPubSub(self._side, self._timeout)

    async def aclose(self) -> None:
        pass


class SimRedisBackend(AsyncRedisBackend):
    """The real asyncio Redis backend, its redis-py client the simulated one."""

    def __init__(self, url: str, side: Side, channel: str) -> None:
        self._side, self._channel = side, channel
        super().__init__(parse_url(url))

    def _connect(self) -> None:
        # as AsyncRedisBackend._connect, on the simulated client; the wake-up channel
        # named by the simulator (a random one would make runs differ)
        client: Any = SimRedisClient(self._side, self.options.timeout)
        self.redis = client
        self.wire = AsyncWire(client)
        self.listener = AsyncWakeListener(client, self.where, self.options.timeout)
        self.listener.channel = self._channel
        self._undoing: set[asyncio.Task[None]] = set()


def _backend(side: Side, timeout: float) -> SimRedisBackend:
    url = f"redis://sim-redis:6379/0?timeout={timeout}&connect_timeout={timeout}"
    backend = SimRedisBackend(url, side, f"{KEY_PREFIX}wake:{side.client:016x}")
    backend.request_bound = timeout
    return backend


def sim_redis_backend(
    model: RedisModel, network: Network, client_number: int, timeout: float = REQUEST_BOUND
) -> SimRedisBackend:
    """Client ``client_number``'s Redis backend, over ``network`` to ``model``; a call
    unanswered for ``timeout`` seconds (the URL's ``timeout``) is BackendUnavailable."""
    return _backend(Side(model, NetworkTransport(network), client_number), timeout)


def direct_redis_backend(
    model: RedisModel, client: int = 0, timeout: float = 10.0
) -> SimRedisBackend:
    """A Redis backend whose requests reach ``model`` at once (no network)."""
    return _backend(Side(model, DirectTransport(), client), timeout)
