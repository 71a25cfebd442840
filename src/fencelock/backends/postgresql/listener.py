"""Waiting without polling: one ``LISTEN`` connection per client, shared by its waiters.

A release announces the freed name and the head of its line with ``pg_notify`` in
the same statement. The listener reads the announcements on a connection of its own
(psycopg's ``notifies()`` holds its connection) and rings that waiter's bell, if it
is one of this client's. A waiter subscribes before it looks at the lease, so a release between its
look and its wait still rings. If the listening connection fails, every bell
rings (each waiter looks again) and the next subscriber starts a new one.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import psycopg

from fencelock import forking
from fencelock.aio import stop
from fencelock.backends.postgresql.connections import Connections
from fencelock.backends.postgresql.statements import parse_notice


class Listener:
    def __init__(self, connections: Connections) -> None:
        self._connections = connections
        self._bells: dict[str, dict[str, asyncio.Event]] = {}  # name -> waiter -> bell
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._reader: asyncio.Task[None] | None = None
        self._starting: asyncio.Lock | None = None

    async def subscribe(self, name: str, waiter: str) -> asyncio.Event:
        """A bell that rings when ``name`` may have been released for ``waiter`` (from now
        on): a release wakes the head of the line only."""
        await self._listening()
        return self._bell(name, waiter)

    def subscribed(self, name: str, waiter: str) -> asyncio.Event | None:
        """:meth:`subscribe`, if this client listens already (no I/O); else None."""
        return self._bell(name, waiter) if self._live() else None

    def _bell(self, name: str, waiter: str) -> asyncio.Event:
        bell = asyncio.Event()
        self._bells.setdefault(name, {})[waiter] = bell
        return bell

    def _live(self) -> bool:
        return self._reader is not None and not self._reader.done()

    @property
    def pid(self) -> int:
        """The listening session's server process: a queued waiter is alive while it is."""
        return self._conn.info.backend_pid if self._conn is not None else 0

    def unsubscribe(self, name: str, waiter: str) -> None:
        bells = self._bells.get(name)
        if bells is not None:
            bells.pop(waiter, None)
            if not bells:
                del self._bells[name]

    async def _listening(self) -> None:
        if self._live():
            return
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self._live():
                return
            conn = await self._connections.connect()
            try:
                await conn.execute(f'LISTEN "{self._connections.objects.channel}"')
            except psycopg.Error as exc:
                with contextlib.suppress(Exception):
                    await conn.close()
                raise self._connections.translated(exc) from exc
            self._conn = conn
            self._reader = asyncio.get_running_loop().create_task(self._read(conn))

    async def _read(self, conn: psycopg.AsyncConnection[Any]) -> None:
        try:
            async for notice in conn.notifies():
                name, waiter = parse_notice(notice.payload)
                bells = self._bells.get(name, {})
                if waiter is None:
                    for bell in bells.values():
                        bell.set()
                elif waiter in bells:
                    bells[waiter].set()
        except psycopg.Error:
            pass  # the connection is gone: every waiter looks again (below)
        finally:
            for bells in self._bells.values():
                for bell in bells.values():
                    bell.set()
            with contextlib.suppress(Exception):
                await conn.close()

    async def close(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            with contextlib.suppress(Exception):
                await stop(reader)
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()

    def forget(self) -> None:
        """In a forked child: the parent's listening connection is left alone."""
        forking.abandon(self._conn, self._reader)
        self._conn, self._reader, self._starting = None, None, None
        self._bells = {}
