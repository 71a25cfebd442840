"""The etcd wire's HTTP/1.1 reply reader, fed bytes without a socket."""

from __future__ import annotations

import asyncio

import h11
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fencelock.backends.etcd.wire import UNREADABLE, Unanswered, Wire, _parse_head, _read_reply


def _read_all(data: bytes, replies: int) -> list[tuple[int, bytes, bool]]:
    async def main() -> list[tuple[int, bytes, bool]]:
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        return [await _read_reply(reader) for _ in range(replies)]

    return asyncio.run(main())


def _chunked(body: bytes, sizes: list[int], trailers: list[str]) -> bytes:
    out, rest = bytearray(), body
    for size in sizes:
        piece, rest = rest[:size], rest[size:]
        if piece:
            out += b"%x\r\n%s\r\n" % (len(piece), piece)
    if rest:
        out += b"%x\r\n%s\r\n" % (len(rest), rest)
    out += b"0\r\n" + "".join(f"{t}\r\n" for t in trailers).encode() + b"\r\n"
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: Grpc-Status\r\n\r\n"
    return head + bytes(out)


@given(
    body=st.binary(max_size=300),
    sizes=st.lists(st.integers(min_value=1, max_value=64), max_size=8),
    trailers=st.lists(st.sampled_from(["Grpc-Status: 0", "Grpc-Message: ok"]), max_size=2),
)
def test_a_chunked_reply_is_read_whole_and_leaves_the_next_reply_intact(
    body: bytes, sizes: list[int], trailers: list[str]
) -> None:
    following = b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\n{}"
    first, second = _read_all(_chunked(body, sizes, trailers) + following, 2)
    assert first == (200, body, True)
    assert second == (404, b"{}", True)


def test_connection_close_and_a_body_to_eof_end_the_connection() -> None:
    close = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 3\r\n\r\nabc"
    assert _read_all(close, 1) == [(200, b"abc", False)]
    to_eof = b"HTTP/1.1 200 OK\r\n\r\nuntil the end"
    assert _read_all(to_eof, 1) == [(200, b"until the end", False)]


def test_a_garbled_status_line_is_a_value_error() -> None:
    with pytest.raises(ValueError, match=r"not an HTTP/1\.1 reply"):
        _read_all(b"\x15\x03\x01\x00\x02\x02(\r\n\r\n", 1)


# h11 (the HTTP/1.1 library httpx stands on) as the oracle for the hand parser.

_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=12).filter(
    lambda n: (
        n.strip("-") == n
        and n not in ("content-length", "transfer-encoding", "connection", "trailer")
    )
)
_values = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789 /;=.", max_size=20).map(str.strip)


@st.composite
def _replies(draw: st.DrawFn) -> tuple[bytes, int, bytes]:
    """A valid reply to a POST: its bytes, its status and its body."""
    status = draw(st.sampled_from([200, 201, 400, 404, 500, 503]))
    body = draw(st.binary(max_size=400))
    headers = draw(st.lists(st.tuples(_names, _values), max_size=5))
    head = f"HTTP/1.1 {status} Whatever\r\n" + "".join(f"{n}: {v}\r\n" for n, v in headers)
    if draw(st.booleans()):
        sizes = draw(st.lists(st.integers(min_value=1, max_value=64), max_size=8))
        chunks = _chunked(body, sizes, []).split(b"\r\n\r\n", 1)[1]  # without its head
        return (head + "Transfer-Encoding: chunked\r\n\r\n").encode() + chunks, status, body
    return (head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body, status, body


def _h11_reads(data: bytes) -> tuple[int, bytes] | None:
    """What h11 reads from ``data`` (then EOF): status and body, or None if it refuses."""
    connection = h11.Connection(h11.CLIENT)
    connection.send(h11.Request(method="POST", target="/", headers=[("Host", "e")]))
    connection.send(h11.EndOfMessage())
    connection.receive_data(data)
    connection.receive_data(b"")
    status, body = 0, bytearray()
    try:
        while True:
            event = connection.next_event()
            if isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                return status, bytes(body)
            elif event is h11.NEED_DATA or isinstance(event, h11.ConnectionClosed):
                return None
    except h11.RemoteProtocolError:
        return None


def _ours(data: bytes) -> tuple[int, bytes] | None:
    try:
        status, body, _ = _read_all(data, 1)[0]
    except UNREADABLE:
        return None
    return status, body


@given(_replies())
def test_a_valid_reply_reads_as_h11_reads_it(reply: tuple[bytes, int, bytes]) -> None:
    data, status, body = reply
    assert _h11_reads(data) == (status, body)
    assert _ours(data) == (status, body)


@given(_replies(), st.data())
def test_a_reply_cut_anywhere_is_refused_by_both(
    reply: tuple[bytes, int, bytes], data: st.DataObject
) -> None:
    whole = reply[0]
    cut = data.draw(st.integers(min_value=0, max_value=len(whole) - 1))
    assert _h11_reads(whole[:cut]) is None
    assert _ours(whole[:cut]) is None


_blanks = st.text(alphabet=" \t", max_size=3)


@st.composite
def _heads(draw: st.DrawFn) -> tuple[bytes, int]:
    """A valid reply head, names in any case, blanks around values: bytes, status."""
    status = draw(st.integers(min_value=200, max_value=599))  # a final reply
    lines = [f"HTTP/1.1 {status} {draw(_values)}"]
    for name, value in draw(st.lists(st.tuples(_names, _values), max_size=8)):
        cased = "".join(c.upper() if draw(st.booleans()) else c for c in name)
        lines.append(f"{cased}:{draw(_blanks)}{value}{draw(_blanks)}")  # no blank before ":"
    return ("\r\n".join(lines) + "\r\n\r\n").encode(), status


def _h11_head(head: bytes) -> tuple[int, dict[str, str]]:
    connection = h11.Connection(h11.CLIENT)
    connection.send(h11.Request(method="POST", target="/", headers=[("Host", "e")]))
    connection.send(h11.EndOfMessage())
    connection.receive_data(head)
    response = connection.next_event()
    assert isinstance(response, h11.Response)
    headers = {name.decode(): value.decode().lower() for name, value in response.headers}
    return response.status_code, headers


@given(_heads())
def test_a_head_parses_as_h11_parses_it(head: tuple[bytes, int]) -> None:
    data, status = head
    assert _parse_head(data) == _h11_head(data)
    assert _parse_head(data)[0] == status


def test_a_header_block_over_64_kib_is_a_fencelock_error() -> None:
    """It leaked asyncio.LimitOverrunError (issue 24.3)."""
    huge = b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 70_000 + b"\r\nContent-Length: 0\r\n\r\n"

    async def main() -> None:
        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(huge)
            await writer.drain()

        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        wire = Wire((f"http://127.0.0.1:{port}",), False, 1.0)
        try:
            with pytest.raises(Unanswered):
                await wire.send("POST", f"http://127.0.0.1:{port}", "/v3/kv/range", b"{}", {}, 5.0)
        finally:
            wire.close()
            server.close()

    asyncio.run(main())
