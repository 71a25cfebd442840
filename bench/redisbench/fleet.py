"""The redis-servers a run uses (one single, five Redlock nodes), and what they are asked."""

from __future__ import annotations

import contextlib
import os
from typing import Any

import redis
import redis.asyncio

from fencelock.testing import RedisServer, ServerPool
from redisbench.common import HUNG, KILLED, Address


class Fleet:
    """The redis-servers of this run: one for ``redis://`` and five Redlock nodes.

    They come from :mod:`fencelock.testing` (free loopback ports, no persistence, a
    directory and a log each, in ``pool``, which stops them). :meth:`fault` stops one
    node (SIGSTOP) and kills another; :meth:`heal` restarts both, empty, on their ports.
    """

    def __init__(self, pool: ServerPool) -> None:
        self.pool = pool
        self.single: RedisServer | None = None
        self.nodes: list[RedisServer] = []

    def start(self, nodes: int) -> None:
        self.single = self.pool.redis(name="single")
        self.nodes = [self.pool.redis(name=f"node{i}") for i in range(nodes)]

    @property
    def single_address(self) -> Address:
        assert self.single is not None
        return ("127.0.0.1", self.single.port)

    @property
    def single_pid(self) -> int:
        assert self.single is not None and self.single.pid is not None
        return self.single.pid

    @property
    def node_addresses(self) -> list[Address]:
        return [("127.0.0.1", node.port) for node in self.nodes]

    def fault(self) -> None:
        self.nodes[HUNG].pause()
        self.nodes[KILLED].kill()

    def heal(self) -> None:
        for i in (HUNG, KILLED):
            self.nodes[i].stop()
            self.nodes[i].start()


def redis_requests(address: Address) -> int:
    """Client requests the server has read so far (``total_reads_processed``).

    One read event per request, or per pipeline: round trips, not commands, so the
    commands a Lua script runs inside Redis do not count.
    """
    with redis.Redis(host=address[0], port=address[1], decode_responses=True) as client:
        stats: dict[str, Any] = client.info("stats")
    return int(stats["total_reads_processed"])


def open_sockets(exclude: int | None = None) -> int:
    """Sockets this process has open (Linux ``/proc/self/fd``); -1 where unknown."""
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return -1
    count = 0
    for fd in fds:
        if exclude is not None and fd == str(exclude):
            continue
        with contextlib.suppress(OSError):
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
    return count
