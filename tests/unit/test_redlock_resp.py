"""The RESP2 reply parser: any replies, cut anywhere, come back whole and in order."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fencelock.backends.redis.resp import ProtocolError, ReplyError, ReplyParser

line_text = st.text(
    st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=20
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
        return (b"+" if kind == "simple" else b"-") + text.encode() + b"\r\n"
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
    assert isinstance(error, ReplyError) and error.text == "NOSCRIPT No matching script."


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
