"""What the Redis backends say to the server, written once as conversations (sans-I/O).

A conversation is a generator: it yields commands (a script and its packed call, or
a plain packed command) and receives their replies; an error reply is thrown into it.
A script the server does not know (``NOSCRIPT``) is loaded and called again by
:class:`ConversationState`, once for every conversation. A :class:`~.wire.Wire` runs one on one
connection, blocking or with asyncio; the conversation itself decides what is said
and what the replies mean, in sync and async alike.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import Generic, TypeVar

from redis.exceptions import NoScriptError, ResponseError

from fencelock.backends.base import Acquired, AttemptResult, LockInfo, Renewal
from fencelock.backends.redis.errors import not_replicated
from fencelock.backends.redis.options import RedisOptions
from fencelock.backends.redis.resp import RawReply, pack
from fencelock.backends.redis.scripts import (
    Command,
    KeyStyle,
    LockKeys,
    attempt_result,
    inspect_command,
    leave_command,
    lock_info,
    release_command,
    renew_command,
    renew_many_command,
    waiters_command,
)

T = TypeVar("T")
Conversation = Generator[Command, RawReply, T]

PING: Command = (None, pack([b"PING"]))


def acquire(
    command: Command, keys: LockKeys, owner: str, options: RedisOptions
) -> Conversation[AttemptResult]:
    """Take the lease or join the queue; with ``wait_replicas``, only once replicas have it.

    ``WAIT`` counts the replicas that have this connection's writes, so it follows the
    script on the same connection. Too few: the lease is given back and not taken.
    """
    result = attempt_result((yield (command)))
    if options.wait_replicas and isinstance(result, Acquired):
        acked = yield (None, pack([b"WAIT", options.wait_replicas, options.wait_timeout_ms]))
        if acked < options.wait_replicas:
            yield (release_command(keys, owner))
            raise not_replicated(options, acked)
    return result


def release(keys: LockKeys, owner: str) -> Conversation[bool]:
    """Compare-and-delete (waking the oldest waiter); False if ``owner`` did not hold it."""
    return bool((yield (release_command(keys, owner))) == 1)


def renew(keys: LockKeys, owner: str, ttl: float) -> Conversation[bool]:
    """Compare-and-extend to ``ttl``; False if ``owner`` no longer holds the lease."""
    return bool((yield (renew_command(keys, owner, ttl))) == 1)


def renew_many(renewals: Sequence[Renewal], style: KeyStyle) -> Conversation[list[bool]]:
    """Compare-and-extend each, in one script; one by one if the server is a cluster
    node, which refuses a script whose keys lie in several slots (CROSSSLOT)."""
    try:
        replies = yield (renew_many_command(renewals, style))
    except ResponseError as exc:
        if "CROSSSLOT" not in str(exc):
            raise
        replies = []
        for name, owner, ttl in renewals:
            replies.append((yield (renew_command(style.of(name), owner, ttl))))
    return [reply == 1 for reply in replies]


def leave(keys: LockKeys, owner: str, channel: str) -> Conversation[None]:
    """Take ``owner`` out of the lock's queue of waiters."""
    yield (leave_command(keys, owner, channel))


def undo(keys: LockKeys, owner: str, channel: str) -> Conversation[None]:
    """Give back whatever an attempt whose reply was never read may have taken."""
    yield (release_command(keys, owner))
    yield (leave_command(keys, owner, channel))


def inspect(name: str, style: KeyStyle) -> Conversation[LockInfo | None]:
    """The lock's holder, remaining TTL, last token and waiters; None if never used."""
    owner, pttl, token, waiters = yield (inspect_command(style.of(name)))
    return lock_info(name, owner, pttl, token, waiters)


def waiters(name: str, style: KeyStyle) -> Conversation[list[str]]:
    """The owners waiting in the lock's queue, first in line first."""
    owners = yield (waiters_command(style.of(name)))
    return [owner.decode() if isinstance(owner, bytes) else str(owner) for owner in owners]


def held(prefix: str, style: KeyStyle) -> Conversation[list[LockInfo]]:
    """The held locks whose names start with ``prefix``, by name."""
    pattern = style.scan_pattern(prefix)
    cursor, keys = "0", set()
    while True:
        cursor, batch = yield (None, pack([b"SCAN", cursor, b"MATCH", pattern, b"COUNT", 500]))
        keys.update(batch)
        if cursor == "0":
            break
    infos = []
    for key in sorted(keys):
        info = yield from inspect(style.name_of(key), style)
        if info is not None and info.held:
            infos.append(info)
    return infos


def ping() -> Conversation[None]:
    """Whether the server answers at all."""
    yield PING


class ConversationState(Generic[T]):
    """One conversation as a wire runs it: the bytes to send next, then their reply or error.

    :attr:`command` is None once the conversation is over; :attr:`result` is its outcome.
    """

    result: T

    def __init__(self, talk: Conversation[T]) -> None:
        self._talk = talk
        self.command: bytes | None = None
        self._sent: Command = PING
        self._loading = self._retried = False
        self._advance(talk.send, None)

    def answer(self, reply: RawReply) -> None:
        """The reply to :attr:`command` (an error reply as the ``ResponseError`` itself)."""
        script, call = self._sent
        if self._loading:  # the reply to SCRIPT LOAD: now the call again
            self._loading = False
            if not isinstance(reply, ResponseError):
                self.command, self._retried = call, True
                return
        elif isinstance(reply, NoScriptError) and script is not None and not self._retried:
            self.command, self._loading = script.load_command, True
            return
        if isinstance(reply, ResponseError):
            self._advance(self._talk.throw, reply)
        else:
            self._advance(self._talk.send, reply)

    def _advance(self, step: Callable[[RawReply], Command], value: RawReply) -> None:
        try:
            self._sent = step(value)
        except StopIteration as done:
            self.command, self.result = None, done.value
            return
        self.command, self._retried = self._sent[1], False
