"""What the two Redis backends share of their server: its URL, options and error wording."""

from __future__ import annotations

import functools
from contextlib import AbstractContextManager

from fencelock.backends.base import Capabilities
from fencelock.backends.redis import conversations
from fencelock.backends.redis.errors import translated
from fencelock.backends.redis.options import RedisOptions, redis_options
from fencelock.backends.redis.scripts import KeyStyle, LockKeys
from fencelock.engine.urls import ParsedURL


class RedisServer:
    """One Redis server as a backend sees it (no connection: the drivers make those)."""

    capabilities = Capabilities(
        fair=True,
        renews_in_batches=True,
    )

    def outlives_client(self, renewed: bool) -> bool:
        """Whether a lease left to its TTL stays on the server after the client closes."""
        return True

    def __init__(self, parsed: ParsedURL, options: RedisOptions | None = None) -> None:
        """The server ``parsed`` names, or the one ``options`` name (a cluster's node)."""
        self.url = parsed.redacted
        self.request_bound = parsed.request_bound
        self.options = redis_options(parsed) if options is None else options
        self.where = self.options.where
        self.keys = KeyStyle(self.options.bare_keys)

    def _translated(self) -> AbstractContextManager[None]:
        return translated(self.where, self.options.tls)

    def _undo_later(self, keys: LockKeys, owner: str, channel: str) -> Undoing:
        """The conversation to repeat until it gets through (a generator runs once)."""
        return functools.partial(conversations.undo, keys, owner, channel)


Undoing = functools.partial[conversations.Conversation[None]]
