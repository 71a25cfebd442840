"""Every request to etcd's gateway: keep-alive HTTP/1.1 connections of fencelock's own.

httpx, which fencelock used first, spent about 1.5 ms of Python on each request here
(its pool, its event hooks, its header model), three times the loopback round trip to
etcd's gateway; this wire writes one pre-formatted request and reads one reply, in
about 0.5 ms.
A watch (a long stream) gets a connection of its own, closed when it ends.

A request whose connection could not be made was never sent (:class:`NotSent`:
the caller may try another member); one that failed after it was written may have
been carried out (:class:`Unanswered`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from fencelock import blocking_call, clock, forking
from fencelock.aio import TIMEOUTS, opened_within, within

# What a reply that cannot be read raises: a connection that failed or ended early, a
# reply that is not HTTP/1.1, a header block or chunk-size line over the reader's
# 64 KiB limit (asyncio's LimitOverrunError). Each becomes Unanswered, then a
# fencelock error naming the member.
UNREADABLE = (OSError, EOFError, ValueError, asyncio.LimitOverrunError)

# An idle connection older than this is closed rather than used: a server or proxy may
# have dropped it meanwhile, and a request written into it would be answered by EOF.
STALE_AFTER = 5.0
MAX_IDLE = 32  # idle connections kept per endpoint


class NotSent(Exception):
    """The connection could not be made: the request never left."""


class Unanswered(Exception):
    """The request was written, and no complete reply came: its outcome is unknown."""


@dataclass
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    idle_since: float = 0.0


@dataclass
class _Endpoint:
    host: str
    port: int
    tls: bool
    authority: str
    idle: list[_Connection] = field(default_factory=list)


def _endpoint(url: str) -> _Endpoint:
    parts = urlsplit(url)
    tls = parts.scheme == "https"
    port = parts.port or (443 if tls else 80)
    return _Endpoint(parts.hostname or "", port, tls, parts.netloc)


class Wire:
    """POSTs JSON bodies to the endpoints ``urls`` (``http(s)://host:port``)."""

    def __init__(
        self, urls: tuple[str, ...], tls: ssl.SSLContext | bool, connect_timeout: float
    ) -> None:
        self._endpoints = {url: _endpoint(url) for url in urls}
        self._tls = tls if isinstance(tls, ssl.SSLContext) else None
        self._connect_timeout = connect_timeout

    async def send(
        self,
        method: str,
        url: str,
        path: str,
        body: bytes,
        headers: dict[str, str],
        timeout: float,
    ) -> tuple[int, bytes]:
        """The status and body of the reply to ``METHOD path`` on the endpoint ``url``."""
        endpoint = self._endpoints[url]
        connection = await self._connection(endpoint)
        try:
            connection.writer.write(_request(method, endpoint, path, body, headers))
            reading, reader = _read_reply(connection.reader), connection.reader
            if blocking_call.active():  # the reply read on this thread (blocking_call.py)
                transport = connection.writer.transport
                got = await blocking_call.reading_here(reading, reader, transport, timeout, "etcd")
            else:
                got = await within(timeout, reading)
            status, reply, keep = got
        except BaseException as exc:
            _close(connection)
            if isinstance(exc, (*UNREADABLE, *TIMEOUTS)):
                raise Unanswered(str(exc) or type(exc).__name__) from exc
            raise  # cancelled: the connection is gone with the unread reply
        if keep and len(endpoint.idle) < MAX_IDLE:
            connection.idle_since = clock.now()
            endpoint.idle.append(connection)
        else:
            _close(connection)
        return status, reply

    async def stream(
        self, url: str, path: str, body: bytes, headers: dict[str, str]
    ) -> AsyncGenerator[tuple[int, bytes], None]:
        """``POST path`` whose reply is a long stream: first ``(status, b"")``, then
        ``(status, line)`` for each line of its body (a non-200 reply: one item, its
        whole body). On a connection of its own, closed when the caller stops."""
        endpoint = self._endpoints[url]
        connection = await self._connect(endpoint)
        try:
            connection.writer.write(_request("POST", endpoint, path, body, headers))
            try:
                status, chunked = await _read_head(connection.reader)
            except UNREADABLE as exc:
                raise Unanswered(str(exc) or type(exc).__name__) from exc
            if status != 200 or not chunked:
                yield status, await connection.reader.read()
                return
            yield status, b""
            pending = b""
            while True:
                try:
                    chunk = await _read_chunk(connection.reader)
                except UNREADABLE as exc:
                    raise Unanswered(str(exc) or type(exc).__name__) from exc
                if chunk is None:
                    return
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    if line.strip():
                        yield status, line
        finally:
            _close(connection)

    async def _connection(self, endpoint: _Endpoint) -> _Connection:
        now = clock.now()
        while endpoint.idle:
            connection = endpoint.idle.pop()
            if now - connection.idle_since < STALE_AFTER and not connection.reader.at_eof():
                return connection
            _close(connection)
        return await self._connect(endpoint)

    async def _connect(self, endpoint: _Endpoint) -> _Connection:
        await blocking_call.onto_the_loop()  # opening a connection needs the loop
        try:
            reader, writer = await opened_within(
                self._connect_timeout,
                asyncio.open_connection(
                    endpoint.host,
                    endpoint.port,
                    ssl=self._tls if endpoint.tls else None,
                    server_hostname=endpoint.host if endpoint.tls else None,
                ),
                close=lambda streams: streams[1].close(),
            )
        except (OSError, TimeoutError, ssl.SSLError) as exc:
            raise NotSent(str(exc) or type(exc).__name__) from exc
        return _Connection(reader, writer)

    def close(self) -> None:
        for endpoint in self._endpoints.values():
            for connection in endpoint.idle:
                _close(connection)
            endpoint.idle.clear()

    def forget(self) -> None:
        """In a forked child: the parent's sockets are not ours to use or close.

        Kept alive, not dropped: a collected ``StreamWriter`` closes its transport,
        which takes the socket out of the epoll set the child shares with its parent,
        and the parent would never hear that connection's next reply.
        """
        for endpoint in self._endpoints.values():
            forking.abandon(endpoint.idle)
            endpoint.idle = []


def _request(
    method: str, endpoint: _Endpoint, path: str, body: bytes, headers: dict[str, str]
) -> bytes:
    extra = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    return (
        f"{method} {path} HTTP/1.1\r\nHost: {endpoint.authority}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
    ).encode() + body


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, bool]:
    """A streamed reply's status, and whether its body is chunked."""
    status, headers = _parse_head(await reader.readuntil(b"\r\n\r\n"))
    return status, headers.get("transfer-encoding") == "chunked"


async def _read_chunk(reader: asyncio.StreamReader) -> bytes | None:
    """The next chunk of a chunked body; ``None`` after the last (trailers read)."""
    size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
    if size == 0:
        while await reader.readuntil(b"\r\n") != b"\r\n":
            pass
        return None
    return (await reader.readexactly(size + 2))[:-2]


def _parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    if not version.startswith("HTTP/1.") or not rest[:3].isdigit():
        raise ValueError(f"not an HTTP/1.1 reply: {lines[0][:40]!r}")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name:
            headers[name.strip().lower()] = value.strip().lower()
    return int(rest[:3]), headers


async def _read_reply(reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
    """One HTTP/1.1 reply: its status, its body, and whether the connection stays open."""
    status, headers = _parse_head(await reader.readuntil(b"\r\n\r\n"))
    keep = headers.get("connection") != "close"
    if headers.get("transfer-encoding") == "chunked":
        return status, await _read_chunks(reader), keep
    if "content-length" in headers:
        return status, await reader.readexactly(int(headers["content-length"])), keep
    return status, await reader.read(), False  # until the server closes


async def _read_chunks(reader: asyncio.StreamReader) -> bytes:
    body = bytearray()
    while (chunk := await _read_chunk(reader)) is not None:
        body += chunk
    return bytes(body)


def _close(connection: _Connection) -> None:
    with contextlib.suppress(Exception):
        connection.writer.close()
