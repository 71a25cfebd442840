"""The real Redlock backend (:class:`~fencelock.backends.redlock.backend.AsyncRedlockBackend`:
its two phases, its rounds, the release of a failed try everywhere, the undo of a late
phase-1 win, its release listener, ``inspect`` and ``list`` through redis-py) run
against N :class:`~fencelock.sim.redis_model.RedisModel` nodes, each running the
backend's own scripts on its own clock.

Nothing of the backend is replaced: the simulation is beneath it, at the socket. The
virtual loop's ``create_connection`` (which the backend's node links and redis-py both
call) dials :class:`Dialer`: a TCP connection to a node, accepted by the node's kernel
(also while the node is paused) after a round trip, whose bytes travel as messages:
:class:`SimSocket` reads the RESP commands written to it, and hands the node's RESP
replies and pushed messages to the protocol, in order. A message lost hangs the
connection from there on (the backend's per-node timeout ends it); a node's restart
closes its connections (EOF).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from fencelock.backends.redlock.backend import AsyncRedlockBackend
from fencelock.engine.urls import parse_url
from fencelock.sim.backend import REQUEST_BOUND
from fencelock.sim.loop import client_number
from fencelock.sim.network import Network
from fencelock.sim.redis import NetworkTransport, Transport, _InOrder
from fencelock.sim.redis_model import CommandError, Conn, RedisModel, Reply, Status

NODE_TIMEOUT = 0.1  # how long the backend waits for one node (the URL's timeout)
PORT = 6379


def encode(reply: Reply, protocol: int = 2) -> bytes:
    """A reply in RESP2 or RESP3, as a Redis server writes it."""
    if isinstance(reply, CommandError):
        return b"-" + reply.text.encode() + b"\r\n"
    if isinstance(reply, Status):
        return b"+" + reply.encode() + b"\r\n"
    if reply is None:
        return b"_\r\n" if protocol == 3 else b"$-1\r\n"
    if isinstance(reply, bool):
        return b":%d\r\n" % int(reply)
    if isinstance(reply, int):
        return b":%d\r\n" % reply
    if isinstance(reply, str):
        data = reply.encode()
        return b"$%d\r\n%b\r\n" % (len(data), data)
    if isinstance(reply, dict):
        pairs = [encode(part, protocol) for item in reply.items() for part in item]
        head = b"%%%d\r\n" % len(reply) if protocol == 3 else b"*%d\r\n" % len(pairs)
        return head + b"".join(pairs)
    items = list(reply)
    return b"*%d\r\n" % len(items) + b"".join(encode(item, protocol) for item in items)


def split_commands(buffer: bytes) -> tuple[list[list[str]], bytes]:
    """The complete RESP commands (arrays of bulk strings) at the start of ``buffer``,
    and what is left of it (a command not all written yet)."""
    commands: list[list[str]] = []
    pos = 0
    while pos < len(buffer):
        parsed = _one_command(buffer, pos)
        if parsed is None:
            break
        words, pos = parsed
        commands.append(words)
    return commands, buffer[pos:]


def _one_command(buffer: bytes, pos: int) -> tuple[list[str], int] | None:
    end = buffer.find(b"\r\n", pos)
    if end < 0:
        return None
    count, pos = int(buffer[pos + 1 : end]), end + 2
    words = []
    for _ in range(count):
        end = buffer.find(b"\r\n", pos)
        if end < 0:
            return None
        size, pos = int(buffer[pos + 1 : end]), end + 2
        if len(buffer) < pos + size + 2:
            return None
        words.append(buffer[pos : pos + size].decode())
        pos += size + 2
    return words, pos


class SimSocket(asyncio.Transport):
    """A client's end of one TCP connection to a node."""

    def __init__(
        self,
        model: RedisModel,
        transport: Transport,
        client: int,
        protocol: asyncio.BaseProtocol,
        peer: tuple[str, int],
    ) -> None:
        super().__init__({"peername": peer})
        self._model, self._transport, self._client = model, transport, client
        self._protocol = protocol
        self._buffer = b""
        self._closing = False
        self._up: _InOrder[Sequence[str]] = _InOrder(lambda words: model.receive(self.conn, words))
        down: _InOrder[Reply] = _InOrder(self._hear)

        def send(message: Reply) -> bool:
            number = down.ticket()
            return transport.carry(client, False, lambda: down.arrive(number, message))

        def reset() -> None:
            transport.carry(client, False, self._eof, True)

        self.conn = Conn(client, send, reset, alive=lambda: transport.alive(client))

    # --- what the protocol calls ------------------------------------------------------

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing:
            return
        commands, self._buffer = split_commands(self._buffer + bytes(data))
        for words in commands:
            self._transport.carry(self._client, True, self._arrival(self._up.ticket(), words))

    def _arrival(self, number: int, words: list[str]) -> Callable[[], None]:
        return lambda: self._up.arrive(number, words)

    def writelines(self, list_of_data: Any) -> None:
        self.write(b"".join(list_of_data))

    def can_write_eof(self) -> bool:
        return False

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        self.abort()

    def abort(self) -> None:
        if self._closing:
            return
        self._closing = True
        self._model.close(self.conn)
        asyncio.get_running_loop().call_soon(self._protocol.connection_lost, None)

    def discard(self) -> None:
        """Closed before it was made (the dial given up on)."""
        self._closing = True
        self._model.close(self.conn)

    def get_write_buffer_size(self) -> int:
        return 0

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def is_reading(self) -> bool:
        return not self._closing

    # --- what the node sends ------------------------------------------------------------

    def _hear(self, message: Reply) -> None:
        if not self._closing:
            data = encode(message, self.conn.protocol)
            self._protocol.data_received(data)  # type: ignore[attr-defined]

    def _eof(self) -> None:
        """The node's process ended: its kernel closed the connection."""
        if self._closing:
            return
        self._closing = True
        self._protocol.eof_received()  # type: ignore[attr-defined]
        self._protocol.connection_lost(None)


class Dialer:
    """The virtual loop's ``create_connection``: ``host`` names a node."""

    def __init__(self, nodes: dict[str, RedisModel], transport: Transport) -> None:
        self.nodes, self.transport = nodes, transport

    async def __call__(
        self, protocol_factory: Callable[[], asyncio.BaseProtocol], host: str, port: int
    ) -> tuple[asyncio.BaseTransport, asyncio.BaseProtocol]:
        model = self.nodes.get(host)
        if model is None or port != PORT:
            raise ConnectionRefusedError(f"nothing listens at {host}:{port}")
        client = client_number.get()
        number = -1 if client is None else client
        protocol = protocol_factory()
        socket = SimSocket(model, self.transport, number, protocol, (host, port))
        accepted: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def answer() -> None:
            if not accepted.done():
                accepted.set_result(None)

        def arrive() -> None:  # the SYN: the node's kernel accepts, and says so
            model.accept(socket.conn)
            self.transport.carry(number, False, answer)

        self.transport.carry(number, True, arrive)
        try:
            await accepted
        except BaseException:  # given up before it was accepted: the protocol never knew
            socket.discard()
            raise
        protocol.connection_made(socket)
        return socket, protocol


class RedisNodes:
    """Redlock's N nodes: the lock is ``owner``'s while a quorum of them has its key."""

    def __init__(self, models: list[RedisModel]) -> None:
        self.models = models
        self.unmodeled: list[str] = []
        for model in models:  # one list for all: the world looks at one
            model.unmodeled = self.unmodeled

    @property
    def quorum(self) -> int:
        return len(self.models) // 2 + 1

    def grant_until(self, name: str, owner: str, true_now: float) -> float | None:
        ends = [model.grant_until(name, owner, true_now) for model in self.models]
        held = sorted((end for end in ends if end is not None), reverse=True)
        return held[self.quorum - 1] if len(held) >= self.quorum else None

    def holder(self, name: str, true_now: float) -> str | None:
        owners = [model.holder(name, true_now) for model in self.models]
        return next((o for o in owners if o is not None and owners.count(o) >= self.quorum), None)

    def owners(self) -> set[str]:
        return set().union(*(model.owners() for model in self.models))

    def names(self) -> set[str]:
        return set().union(*(model.names() for model in self.models))

    def force_end(self, name: str, true_now: float) -> set[str]:
        held = self.holder(name, true_now)
        for model in self.models:
            model.force_end(name, true_now)
        return set() if held is None else {held}

    def restart(self, keep_data: bool, true_now: float, which: int = 0) -> None:
        """Node ``which`` is killed and started again, with its data or without."""
        self.models[which].restart(keep_data, true_now)


def node_names(count: int) -> list[str]:
    return [f"redlock-{index}" for index in range(count)]


def dialer(nodes: RedisNodes, network: Network) -> Dialer:
    return Dialer(
        dict(zip(node_names(len(nodes.models)), nodes.models, strict=True)),
        NetworkTransport(network),
    )


def sim_redlock_backend(nodes: RedisNodes, timeout: float = NODE_TIMEOUT) -> AsyncRedlockBackend:
    """A real Redlock backend on ``nodes`` (dialled through the loop's ``dial``)."""
    hosts = ",".join(f"{host}:{PORT}" for host in node_names(len(nodes.models)))
    backend = AsyncRedlockBackend(parse_url(f"redlock://{hosts}/0?timeout={timeout}"))
    backend.request_bound = REQUEST_BOUND
    return backend
