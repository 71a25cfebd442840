"""Changes of the names under some prefixes, pushed by ZooKeeper: a child watch on each
prefix's node (a name appears) and on each name's line (a contender comes or goes, its
session's end included), set again as soon as one fires, before the caller looks."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from kazoo import exceptions as kz

from fencelock.aio import within
from fencelock.backends.zookeeper.bridge import on_loop
from fencelock.backends.zookeeper.session import ZkSession


class ZkNameWatch:
    """The watch starts at the first :meth:`changed`; its session's news (a suspension,
    a new session) counts as a change, since watches do not outlive their session."""

    def __init__(self, session: Callable[[], Awaitable[ZkSession]], paths: Sequence[str]) -> None:
        self._session, self._paths = session, tuple(paths)
        self._news: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_listening: Callable[[], None] | None = None

    async def changed(self, timeout: float) -> bool:
        """Until a name under the prefixes changed since the last call (or the watch
        began), or ``timeout``; True if one may have."""
        if self._news is None:
            self._news, self._loop = asyncio.Event(), asyncio.get_running_loop()
            await self._arm()
            return True  # a new watch: what happened before it is not known
        with contextlib.suppress(TimeoutError):
            await within(timeout, self._news.wait())
        fired = self._news.is_set()
        if fired:
            self._news.clear()
            await self._arm()  # before the caller looks: nothing after its look is missed
        return fired

    def _fired(self, *_: Any) -> None:  # on kazoo's thread, or the session's listener
        news, loop = self._news, self._loop
        if news is not None and loop is not None:
            on_loop(loop, news.set)

    async def _arm(self) -> None:
        session = await self._session()
        if self._stop_listening is None:
            self._stop_listening = session.news.listen(self._fired)
        lines = await asyncio.gather(*(self._children(session, path) for path in self._paths))
        await asyncio.gather(
            *(
                self._children(session, f"{path}/{child}")
                for path, children in zip(self._paths, lines, strict=True)
                for child in children
            )
        )

    async def _children(self, session: ZkSession, path: str) -> list[str]:
        """``path``'s children, watched; a node not there yet: its creation, watched."""
        client = session.client
        try:
            children: list[str] = await session.call(client.get_children_async(path, self._fired))
        except kz.NoNodeError:
            if await session.call(client.exists_async(path, self._fired)) is not None:
                self._fired()  # made meanwhile: look again
            return []
        return children

    async def close(self) -> None:
        """Stop hearing news (a watch set already fires once more, unheard)."""
        self._news = None
        stop, self._stop_listening = self._stop_listening, None
        if stop is not None:
            stop()
