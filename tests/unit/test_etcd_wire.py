"""The etcd wire's HTTP/1.1 reply reader, fed bytes without a socket."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fencelock.backends.etcd.wire import _read_reply


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
    with pytest.raises(ValueError):
        _read_all(b"\x15\x03\x01\x00\x02\x02(\r\n\r\n", 1)
