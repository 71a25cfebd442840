"""The RESP packing of the Redis hot path (no I/O)."""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from fencelock.backends.redis.resp import Script, pack

texts = st.text(min_size=0, max_size=30)
parts = st.lists(st.one_of(texts, st.integers(min_value=0, max_value=2**63)), max_size=6)


def parse(data: bytes) -> list[bytes]:
    """A strict reader for an array of bulk strings: what redis-server accepts."""
    header, rest = data.split(b"\r\n", 1)
    assert header.startswith(b"*")
    items = []
    for _ in range(int(header[1:])):
        length_line, rest = rest.split(b"\r\n", 1)
        assert length_line.startswith(b"$")
        length = int(length_line[1:])
        items.append(rest[:length])
        assert rest[length : length + 2] == b"\r\n"
        rest = rest[length + 2 :]
    assert rest == b""
    return items


@given(parts)
def test_pack_is_an_array_of_bulk_strings(args: list[str | int]) -> None:
    assert parse(pack(args)) == [str(a).encode() for a in args]


@given(st.lists(texts, max_size=4), parts, st.lists(texts, max_size=3))
def test_a_partial_command_completes_to_the_whole_command(
    keys: list[str], fixed: list[str | int], tail: list[str]
) -> None:
    script = Script("return 1")
    assert script.partial(keys, fixed).complete(*tail) == script.call(keys, [*fixed, *tail])


def test_scripts_are_named_by_the_sha1_redis_uses() -> None:
    script = Script("return redis.call('PING')")
    assert (
        script.sha == hashlib.sha1(b"return redis.call('PING')", usedforsecurity=False).hexdigest()
    )
    assert parse(script.call(["k"], ["a", 1])) == [
        b"EVALSHA",
        script.sha.encode(),
        b"1",
        b"k",
        b"a",
        b"1",
    ]
    assert parse(script.load_command) == [b"SCRIPT", b"LOAD", script.source.encode()]
