"""The RESP2 reply parser: any replies, cut anywhere, come back whole and in order, as
redis-py's own parser reads them."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis._parsers import _RESP2Parser  # the reference: redis-py's pure-Python reader
from redis._parsers.encoders import Encoder
from redis._parsers.socket import SERVER_CLOSED_CONNECTION_ERROR
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, ResponseError

from fencelock.backends.redis.resp import ProtocolError, ReplyError, ReplyParser

line_text = st.text(
    st.characters(exclude_characters="\r\n", exclude_categories=["Cs"]), max_size=20
)
scalars = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.binary(max_size=40),  # bulk strings may hold \r\n
    st.none(),
    line_text.map(lambda text: ("simple", text)),
    line_text.map(lambda text: ("error", text)),
)
replies = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4), max_leaves=12)


def encode(value: Any) -> bytes:
    if isinstance(value, bool) or value is None:
        return b"$-1\r\n"
    if isinstance(value, int):
        return b":%d\r\n" % value
    if isinstance(value, bytes):
        return b"$%d\r\n%b\r\n" % (len(value), value)
    if isinstance(value, tuple):
        kind, text = value
        line: bytes = (b"+" if kind == "simple" else b"-") + text.encode() + b"\r\n"
        return line
    return b"*%d\r\n" % len(value) + b"".join(encode(item) for item in value)


def expected(value: Any) -> Any:
    if isinstance(value, tuple):
        kind, text = value
        return text if kind == "simple" else ("error", text)
    if isinstance(value, list):
        return [expected(item) for item in value]
    return value


def comparable(value: Any) -> Any:
    if isinstance(value, ReplyError):
        return ("error", value.text)
    if isinstance(value, list):
        return [comparable(item) for item in value]
    return value


@given(st.lists(replies, min_size=1, max_size=6), st.data())
def test_replies_cut_anywhere_parse_whole_and_in_order(
    values: list[Any], data: st.DataObject
) -> None:
    wire = b"".join(encode(value) for value in values)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=8)))
    parser = ReplyParser()
    parsed: list[Any] = []
    for start, end in zip([0, *cuts], [*cuts, len(wire)], strict=True):
        parsed.extend(parser.feed(wire[start:end]))
    assert [comparable(p) for p in parsed] == [expected(v) for v in values]


def test_null_array_and_error_text() -> None:
    parser = ReplyParser()
    [null, error] = parser.feed(b"*-1\r\n-NOSCRIPT No matching script.\r\n")
    assert null is None
    assert isinstance(error, ReplyError)
    assert error.text == "NOSCRIPT No matching script."


def test_a_script_reply_is_a_list_of_int_and_bytes() -> None:
    assert ReplyParser().feed(b"*2\r\n:1\r\n$16\r\n1763772000000001\r\n") == [
        [1, b"1763772000000001"]
    ]


def test_bytes_that_are_not_resp_raise() -> None:
    with pytest.raises(ProtocolError):
        ReplyParser().feed(b"HTTP/1.1 400 Bad Request\r\n")


@given(st.binary(max_size=200), st.data())
def test_any_bytes_parse_or_raise_protocol_error_only(wire: bytes, data: st.DataObject) -> None:
    """Whatever a server (or not a server) sends, cut anywhere: replies, or ProtocolError,
    never another exception (a ValueError from int() leaked before)."""
    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=6)))
    parser = ReplyParser()
    try:
        for start, end in zip([0, *cuts], [*cuts, len(wire)], strict=True):
            parser.feed(wire[start:end])
    except ProtocolError:
        pass


@pytest.mark.parametrize(
    "wire",
    [
        b":12a\r\n",  # not a number
        b"$ 3\r\nabc\r\n",  # int() would take the space
        b"*1_0\r\n",  # and the underscore
        b"$3\r\nabcXY",  # a bulk string not ended by CRLF
        b"$999999999999\r\n",  # over Redis's 512 MiB
        b"+" + b"x" * 70_000,  # a line over 64 KiB, no end in sight
    ],
)
def test_what_no_redis_sends_is_a_protocol_error(wire: bytes) -> None:
    with pytest.raises(ProtocolError):
        ReplyParser().feed(wire)


class _Connection:
    """The three things redis-py's parser reads of a connection."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock, self.socket_timeout = sock, 5.0
        # redis-py's parser internals carry no annotations: untyped calls, here and below
        self.encoder = Encoder("utf-8", "strict", decode_responses=False)  # type: ignore[no-untyped-call]


def redis_py_reads(wire: bytes) -> tuple[list[Any], str]:
    """The replies redis-py's RESP2 parser reads from ``wire`` (sent whole, then the
    connection closed), and how it stopped: "clean" (every byte read), "short" (it wanted
    more), "invalid" (it refused the bytes) or "raised" (it raises some error replies,
    such as ``-NOAUTH``, instead of returning them)."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.sendall(wire)
        ours.shutdown(socket.SHUT_WR)
        parser = _RESP2Parser(socket_read_size=65536)  # type: ignore[no-untyped-call]
        parser.on_connect(_Connection(theirs))  # type: ignore[no-untyped-call]
        replies: list[Any] = []
        try:
            while True:
                replies.append(parser.read_response())
        except RedisConnectionError as exc:
            if str(exc) != SERVER_CLOSED_CONNECTION_ERROR:
                return replies, "raised"
            unread = parser._buffer is not None and parser._buffer.unread_bytes()
            return replies, "short" if unread else "clean"
        except (RedisError, ValueError):
            return replies, "invalid"
        finally:
            parser.on_disconnect()  # type: ignore[no-untyped-call]


def agree(ours: Any, theirs: Any) -> bool:
    """Our reply and redis-py's are the same (it gives simple strings as bytes, and an
    error's text less a known code such as ``NOSCRIPT``)."""
    if isinstance(ours, ReplyError):
        return isinstance(theirs, ResponseError) and ours.text.endswith(str(theirs))
    if isinstance(ours, str):
        return isinstance(theirs, bytes) and theirs.decode(errors="replace") == ours
    if isinstance(ours, list):
        return (
            isinstance(theirs, list)
            and len(ours) == len(theirs)
            and all(agree(a, b) for a, b in zip(ours, theirs, strict=True))
        )
    return type(ours) is type(theirs) and ours == theirs


oracle_scalars = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.binary(max_size=40),
    st.none(),
    line_text.map(lambda text: ("simple", text)),
    line_text.map(lambda text: ("error", "ERR " + text)),  # a code redis-py raises on
)
oracle_replies = st.recursive(
    oracle_scalars, lambda inner: st.lists(inner, max_size=4), max_leaves=12
)


@given(st.lists(oracle_replies, min_size=1, max_size=6), st.data())
def test_valid_replies_read_as_redis_py_reads_them(values: list[Any], data: st.DataObject) -> None:
    wire = b"".join(encode(value) for value in values)
    theirs, how = redis_py_reads(wire)
    assert how == "clean"
    assert len(theirs) == len(values)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=8)))
    parser = ReplyParser()
    ours: list[Any] = []
    for start, end in zip([0, *cuts], [*cuts, len(wire)], strict=True):
        ours.extend(parser.feed(wire[start:end]))
    assert agree(ours, theirs)


@given(st.lists(oracle_replies, min_size=1, max_size=4), st.data())
def test_what_we_accept_of_damaged_replies_redis_py_reads_the_same(
    values: list[Any], data: st.DataObject
) -> None:
    """A valid stream with bytes changed, cut out or put in: every reply we return,
    redis-py returns the same, in order. Where we raise ProtocolError we may be the
    stricter one (a line feed in a status line, a length of ``-01`` or `` 7``)."""
    wire = bytearray(b"".join(encode(value) for value in values))
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(wire)))
        how = data.draw(st.sampled_from(["change", "cut", "insert"]))
        byte = data.draw(st.sampled_from(b"\r\n*$:+-0123456789 x"))
        if how == "insert" or at == len(wire):
            wire.insert(at, byte)
        elif how == "cut":
            del wire[at]
        else:
            wire[at] = byte
    theirs, how = redis_py_reads(bytes(wire))
    try:
        ours = ReplyParser().feed(bytes(wire))
    except ProtocolError:
        return
    if how == "raised":  # it stopped at an error reply it raises: compare up to there
        ours = ours[: len(theirs)]
    assert agree(ours, theirs[: len(ours)])
    assert len(theirs) >= len(ours)


def test_the_oracle_tells_a_disagreement() -> None:
    theirs, how = redis_py_reads(b"+OK\r\n:7\r\n-NOSCRIPT No matching script.\r\n")
    assert how == "clean"
    assert agree(ReplyParser().feed(b"+OK\r\n:7\r\n"), theirs[:2])
    assert not agree(["OK", 8], theirs[:2])
    assert agree(ReplyError("NOSCRIPT No matching script."), theirs[2])
    assert redis_py_reads(b"$5\r\nab")[1] == "short"
    assert redis_py_reads(b"?\r\n")[1] == "invalid"
    assert redis_py_reads(b"-NOAUTH Authentication required.\r\n")[1] == "raised"
