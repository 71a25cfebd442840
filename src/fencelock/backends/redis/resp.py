"""RESP2: commands packed (for every Redis backend) and replies parsed incrementally (Redlock).

Pure: bytes in, Python values out. Simple strings become ``str``, bulk strings
``bytes`` (``None`` when null), integers ``int``, arrays ``list`` and error
replies :class:`ReplyError` *values* (returned, not raised), so that one error
reply never disturbs the replies queued behind it on a pipelined connection.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

_CRLF = b"\r\n"
# Bounds a reply must keep (Redis's own: proto-max-bulk-len 512 MiB; its inline lines
# are far shorter than 64 KiB): past them the bytes are not a Redis server's.
MAX_LINE = 64 * 1024
MAX_BULK = 512 * 1024 * 1024
# A reply as a parser returns it: str, bytes, int, None, a list of these, or an error.
# Its shape depends on the command sent, so it is Any at this driver boundary; the
# code that sent the command reads it.
RawReply = Any
_INCOMPLETE: RawReply = object()


class ReplyError(Exception):
    """An error reply (``-ERR ...``, ``-NOSCRIPT ...``) from the server."""

    @property
    def text(self) -> str:
        return str(self.args[0])


class ProtocolError(Exception):
    """The bytes received are not RESP2."""


class ReplyParser:
    """Feed it bytes as they arrive; it returns each complete reply, in order."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[RawReply]:
        """Append ``data`` and return the replies it completed (often exactly one)."""
        buffer = self._buffer + data if self._buffer else data
        replies: list[RawReply] = []
        pos, size = 0, len(buffer)
        while pos < size:
            reply, end = _parse(buffer, pos)
            if reply is _INCOMPLETE:
                break
            replies.append(reply)
            pos = end
        self._buffer = buffer[pos:] if pos < size else b""
        return replies


def _parse(buffer: bytes, pos: int) -> tuple[RawReply, int]:
    """The reply starting at ``pos`` and where the next one starts; _INCOMPLETE if cut."""
    line_end = _line_end(buffer, pos)
    if line_end < 0:
        return _INCOMPLETE, pos
    kind, head = buffer[pos], buffer[pos + 1 : line_end]
    after = line_end + 2
    if kind == 0x3A:  # ':' integer
        return _number(head), after
    if kind == 0x24:  # '$' bulk string
        return _parse_bulk(buffer, pos, _length(head), after)
    if kind == 0x2A:  # '*' array
        return _parse_array(buffer, pos, _length(head), after)
    if kind == 0x2B:  # '+' simple string
        return _line_text(head), after
    if kind == 0x2D:  # '-' error
        return ReplyError(_line_text(head)), after
    raise ProtocolError(f"not a RESP2 reply: {buffer[pos : pos + 32]!r}")


def _line_end(buffer: bytes, pos: int) -> int:
    """Where the line starting at ``pos`` ends (its CR); -1 if it has not all come."""
    line_end = buffer.find(_CRLF, pos, pos + MAX_LINE + 2)
    if line_end < 0 and len(buffer) - pos > MAX_LINE:
        raise ProtocolError(f"a reply line over {MAX_LINE} bytes: {buffer[pos : pos + 32]!r}")
    return line_end


def _line_text(head: bytes) -> str:
    """A simple string's or error's text; it holds no line feed (RESP's own rule)."""
    if b"\n" in head:
        raise ProtocolError(f"a line feed inside a reply line: {head[:32]!r}")
    return head.decode(errors="replace")


def _parse_bulk(buffer: bytes, pos: int, length: int, after: int) -> tuple[RawReply, int]:
    if length > MAX_BULK:
        raise ProtocolError(f"a bulk string of {length} bytes (at most {MAX_BULK})")
    if length < 0:
        return None, after
    stop = after + length
    if len(buffer) < stop + 2:
        return _INCOMPLETE, pos
    if buffer[stop : stop + 2] != _CRLF:
        raise ProtocolError(f"a bulk string of {length} bytes not ended by CRLF")
    return buffer[after:stop], stop + 2


def _number(head: bytes) -> int:
    """A reply's length or integer; ProtocolError if it is not one."""
    digits = head[1:] if head[:1] == b"-" else head
    if not digits.isdigit():  # int() alone would take " 7", "+7" and "1_0"
        raise ProtocolError(f"not a RESP2 number: {head[:32]!r}")
    return int(head)


def _length(head: bytes) -> int:
    """A bulk string's or array's length: -1 (null) or a count."""
    if head == b"-1":
        return -1
    if head[:1] == b"-":
        raise ProtocolError(f"a negative length other than -1: {head[:32]!r}")
    return _number(head)


def _parse_array(buffer: bytes, pos: int, count: int, after: int) -> tuple[RawReply, int]:
    if count < 0:
        return None, after
    items: list[RawReply] = []
    for _ in range(count):
        item, after = _parse(buffer, after)
        if item is _INCOMPLETE:
            return _INCOMPLETE, pos
        items.append(item)
    return items, after


def pack(parts: Sequence[bytes | str | int]) -> bytes:
    """One command in RESP: an array of bulk strings."""
    out = [b"*%d\r\n" % len(parts)]
    for part in parts:
        data = part if isinstance(part, bytes) else str(part).encode()
        out.append(b"$%d\r\n%b\r\n" % (len(data), data))
    return b"".join(out)


@dataclass(frozen=True)
class Script:
    """A Lua script known by its SHA1; :meth:`call` packs one EVALSHA of it."""

    source: str
    sha: str = field(init=False)
    load_command: bytes = field(init=False, repr=False)

    def __post_init__(self) -> None:
        sha = hashlib.sha1(self.source.encode(), usedforsecurity=False).hexdigest()
        object.__setattr__(self, "sha", sha)
        object.__setattr__(self, "load_command", pack([b"SCRIPT", b"LOAD", self.source]))

    def call(self, keys: Sequence[str], args: Sequence[bytes | str | int]) -> bytes:
        return pack([b"EVALSHA", self.sha, len(keys), *keys, *args])

    def partial(self, keys: Sequence[str], args: Sequence[bytes | str | int]) -> Partial:
        """An EVALSHA packed up to its last arguments (given to :meth:`Partial.complete`)."""
        parts = [b"EVALSHA", self.sha, len(keys), *keys, *args]
        return Partial(len(parts), pack(parts).split(b"\r\n", 1)[1])


@dataclass(frozen=True)
class Partial:
    """A command packed except for its trailing string arguments."""

    count: int
    body: bytes

    def complete(self, *tail: str) -> bytes:
        out = [b"*%d\r\n" % (self.count + len(tail)), self.body]
        for text in tail:
            data = text.encode()
            out.append(b"$%d\r\n%b\r\n" % (len(data), data))
        return b"".join(out)
