"""Changes of the names under some prefixes, pushed by etcd: one watch stream per
prefix, on the key range where those names' lines live (a group's members)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from fencelock.aio import within
from fencelock.backends.etcd import gateway
from fencelock.errors import FencelockError

Stream = Callable[[str, dict[str, Any]], AsyncIterator[dict[str, Any]]]


class EtcdNameWatch:
    """The watch starts at the first :meth:`changed` and runs until :meth:`close`; a
    stream that breaks (a server restart) counts as a change and starts again at the
    next call."""

    def __init__(self, stream: Stream, keys: Sequence[bytes], bound: float) -> None:
        self._stream, self._keys, self._bound = stream, tuple(keys), bound
        self._news: asyncio.Event | None = None
        self._followers: list[asyncio.Task[None]] = []

    async def changed(self, timeout: float) -> bool:
        """Until a key under the prefixes changed since the last call (or the watch
        began), or ``timeout``; True if one may have."""
        if self._news is None or not all(not f.done() for f in self._followers):
            await self._start()
            return True  # a new watch: what happened before it is not known
        with contextlib.suppress(TimeoutError):
            await within(timeout, self._news.wait())
        fired = self._news.is_set()
        self._news.clear()
        return fired

    async def _start(self) -> None:
        await self.close()
        self._news = asyncio.Event()
        created = [asyncio.get_running_loop().create_future() for _ in self._keys]
        self._followers = [
            asyncio.ensure_future(self._follow(key, ready))
            for key, ready in zip(self._keys, created, strict=True)
        ]
        try:
            await within(self._bound, asyncio.gather(*created))
        except BaseException:
            await self.close()
            raise

    async def _follow(self, key: bytes, created: asyncio.Future[None]) -> None:
        news = self._news
        assert news is not None
        try:
            async for message in self._stream("watch", gateway.watch_prefix(key)):
                if gateway.created(message):
                    if not created.done():
                        created.set_result(None)
                    continue
                news.set()
        except FencelockError as exc:
            if not created.done():
                created.set_exception(exc)
        finally:
            news.set()  # the stream ended: look again, and watch anew at the next call

    async def close(self) -> None:
        followers, self._followers = self._followers, []
        for follower in followers:
            follower.cancel()
        for follower in followers:
            with contextlib.suppress(asyncio.CancelledError, FencelockError):
                await follower
