"""The round-trip floor: how fast any Redis or Redlock lock could go on this machine.

A lock cycle (acquire, then release) is at least two round trips to Redis, and a
fencelock Redlock cycle three (phase 1, phase 2 for the token, release) to every node at
once, where the peers' Redlocks make two. This runs, in interleaved rounds (A, B, C, A,
B, C…, ``--rounds`` each, one process, the same servers):

- fencelock's uncontended cycle and the peer's (redis-py's ``Lock``, redis.asyncio's,
  redlock-py, aioredlock), sync and asyncio;
- the floor: the same number of round trips, each a ``PING`` on a plain socket (sync) or
  an asyncio stream, with no parsing and no client library at all; for Redlock, a
  ``PING`` to every node at once, then every reply, per round.

It reports per cycle the wall time and the process's CPU, median round (best-worst), and
two ratios: fencelock's rate over the peer's, and the best any client could reach over the
peer (the peer's time over the floor's). A target above the second ratio cannot be met by
any client on this machine, whatever it leaves out.

``python bench/floor_bench.py`` (the peers come from the ``bench`` extra; a missing one's
rows are left out, said).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import select
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fencelock
from fencelock.testing import ServerPool

PING = b"*1\r\n$4\r\nPING\r\n"
PONG = b"+PONG\r\n"
NODES = 5
TTL = 30


@dataclass
class Row:
    label: str
    wall_us: list[float] = field(default_factory=list)
    cpu_us: list[float] = field(default_factory=list)


@dataclass
class Group:
    title: str
    ours: Row
    peer: Row | None
    floor: Row
    rows: list[Row]


SyncCycle = Callable[[], object]
AsyncCycle = Callable[[], Awaitable[object]]


def _measure(cycle: SyncCycle, seconds: float) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    ends, cycles = wall + seconds, 0
    while True:
        for _ in range(50):
            cycle()
        cycles += 50
        if time.perf_counter() >= ends:
            break
    return (
        (time.perf_counter() - wall) / cycles * 1e6,
        (time.process_time() - cpu) / cycles * 1e6,
    )


async def _ameasure(cycle: AsyncCycle, seconds: float) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    ends, cycles = wall + seconds, 0
    while True:
        for _ in range(50):
            await cycle()
        cycles += 50
        if time.perf_counter() >= ends:
            break
    return (
        (time.perf_counter() - wall) / cycles * 1e6,
        (time.process_time() - cpu) / cycles * 1e6,
    )


# --------------------------------------------------------------------------- floors


def _connect(address: str) -> socket.socket:
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def floor_cycle(socks: list[socket.socket], rounds: int) -> SyncCycle:
    """``rounds`` round trips, each a PING to every socket at once, then every reply."""
    if len(socks) == 1:
        (only,) = socks

        def one() -> None:
            for _ in range(rounds):
                only.sendall(PING)
                only.recv(64)

        return one

    def every() -> None:
        for _ in range(rounds):
            for sock in socks:
                sock.sendall(PING)
            waiting = list(socks)
            while waiting:
                ready, _, _ = select.select(waiting, [], [])
                for sock in ready:
                    sock.recv(64)
                    waiting.remove(sock)

    return every


class _Pongs(asyncio.Protocol):
    """Counts PONGs on one connection; wakes the round once every node has answered."""

    def __init__(self, round_: _Round) -> None:
        self._round = round_
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self._round.answered(len(data) // len(PONG))


class _Round:
    """One future a round, set by the last reply: no task per node."""

    def __init__(self) -> None:
        self.waiting = 0
        self.done: asyncio.Future[None] | None = None

    def answered(self, replies: int) -> None:
        self.waiting -= replies
        if self.waiting <= 0 and self.done is not None and not self.done.done():
            self.done.set_result(None)


async def afloor_cycle(addresses: list[str], rounds: int) -> AsyncCycle:
    """:func:`floor_cycle` on asyncio protocols (the least asyncio can do a round)."""
    loop = asyncio.get_running_loop()
    round_ = _Round()
    transports = []
    for address in addresses:
        host, port = address.rsplit(":", 1)
        transport, _ = await loop.create_connection(lambda: _Pongs(round_), host, int(port))
        transports.append(transport)

    async def cycle() -> None:
        for _ in range(rounds):
            round_.waiting = len(transports)
            round_.done = loop.create_future()
            for transport in transports:
                transport.write(PING)
            await round_.done

    return cycle


# --------------------------------------------------------------------------- the locks


def _optional(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        print(f"{module} is not installed (the bench extra has it): its row is left out")
        return None


def fencelock_sync(client: fencelock.Client) -> SyncCycle:
    lock = client.lock("floor/x", ttl=TTL)
    return lambda: lock.acquire().release()


def fencelock_async(client: fencelock.AsyncClient) -> AsyncCycle:
    lock = client.lock("floor/x", ttl=TTL)

    async def cycle() -> None:
        await (await lock.acquire()).release()

    return cycle


def peer_pair(lock: Any) -> SyncCycle:
    def cycle() -> None:
        lock.acquire()
        lock.release()

    return cycle


def apeer_pair(lock: Any) -> AsyncCycle:
    async def cycle() -> None:
        await lock.acquire()
        await lock.release()

    return cycle


def redlock_py(addresses: list[str]) -> SyncCycle | None:
    module = _optional("redlock")
    if module is None:
        return None
    nodes = [{"host": a.rsplit(":", 1)[0], "port": int(a.rsplit(":", 1)[1])} for a in addresses]
    manager = module.Redlock(nodes)

    def cycle() -> None:
        held = manager.lock("floor/peer", TTL * 1000)
        assert held is not False, "redlock-py did not take a free lock"
        manager.unlock(held)

    return cycle


def aioredlock(addresses: list[str], stack: list[Any]) -> AsyncCycle | None:
    module = _optional("aioredlock")
    if module is None:
        return None
    nodes = [{"host": a.rsplit(":", 1)[0], "port": int(a.rsplit(":", 1)[1])} for a in addresses]
    manager = module.Aioredlock(nodes)
    stack.append(manager.destroy)

    async def cycle() -> None:
        held = await manager.lock("floor/peer", lock_timeout=TTL)
        await manager.unlock(held)

    return cycle


# --------------------------------------------------------------------------- the run


def interleave(sides: list[tuple[Row, SyncCycle]], rounds: int, seconds: float) -> None:
    for _row, cycle in sides:
        _measure(cycle, seconds / 5)  # warm
    for _ in range(rounds):
        for row, cycle in sides:
            wall, cpu = _measure(cycle, seconds)
            row.wall_us.append(wall)
            row.cpu_us.append(cpu)


async def ainterleave(sides: list[tuple[Row, AsyncCycle]], rounds: int, seconds: float) -> None:
    for _row, cycle in sides:
        await _ameasure(cycle, seconds / 5)
    for _ in range(rounds):
        for row, cycle in sides:
            wall, cpu = await _ameasure(cycle, seconds)
            row.wall_us.append(wall)
            row.cpu_us.append(cpu)


def _group(title: str, sides: list[tuple[Row, Any]]) -> Group:
    rows = [row for row, _ in sides]
    peer = rows[1] if len(rows) > 2 else None
    return Group(title, rows[0], peer, rows[-1], rows)


def sync_groups(single: str, nodes: list[str], rounds: int, seconds: float) -> list[Group]:
    import redis

    groups = []
    with ExitStack() as stack:
        client = stack.enter_context(fencelock.connect(f"redis://{single}/0"))
        peer = redis.Redis.from_url(f"redis://{single}/0")
        stack.callback(peer.close)
        sock = _connect(single)
        stack.callback(sock.close)
        sides: list[tuple[Row, SyncCycle]] = [
            (Row("fencelock redis://"), fencelock_sync(client)),
            (Row("redis-py Lock"), peer_pair(peer.lock("floor/peer", timeout=TTL))),
            (Row("floor: 2 round trips (PING, raw socket)"), floor_cycle([sock], 2)),
        ]
        interleave(sides, rounds, seconds)
        groups.append(_group("Redis, sync", sides))

        red = stack.enter_context(fencelock.connect("redlock://" + ",".join(nodes)))
        socks = [_connect(address) for address in nodes]
        for each in socks:
            stack.callback(each.close)
        sides = [(Row("fencelock redlock:// (3 rounds)"), fencelock_sync(red))]
        if (peer_cycle := redlock_py(nodes)) is not None:
            sides.append((Row("redlock-py (2 rounds)"), peer_cycle))
        sides.append((Row("floor: 3 rounds of PING to 5 nodes"), floor_cycle(socks, 3)))
        interleave(sides, rounds, seconds)
        groups.append(_group("Redlock, 5 nodes, sync", sides))
    return groups


async def async_groups(single: str, nodes: list[str], rounds: int, seconds: float) -> list[Group]:
    import redis.asyncio

    groups = []
    closing: list[Any] = []
    client = fencelock.aconnect(f"redis://{single}/0")
    red = fencelock.aconnect("redlock://" + ",".join(nodes))
    peer = redis.asyncio.Redis.from_url(f"redis://{single}/0")
    try:
        sides: list[tuple[Row, AsyncCycle]] = [
            (Row("fencelock redis:// asyncio"), fencelock_async(client)),
            (Row("redis.asyncio Lock"), apeer_pair(peer.lock("floor/peer", timeout=TTL))),
            (Row("floor: 2 round trips (PING, asyncio protocol)"), await afloor_cycle([single], 2)),
        ]
        await ainterleave(sides, rounds, seconds)
        groups.append(_group("Redis, asyncio", sides))

        sides = [(Row("fencelock redlock:// asyncio (3 rounds)"), fencelock_async(red))]
        if (peer_cycle := aioredlock(nodes, closing)) is not None:
            sides.append((Row("aioredlock (2 rounds)"), peer_cycle))
        sides.append((Row("floor: 3 rounds of PING to 5 nodes"), await afloor_cycle(nodes, 3)))
        await ainterleave(sides, rounds, seconds)
        groups.append(_group("Redlock, 5 nodes, asyncio", sides))
    finally:
        await client.aclose()
        await red.aclose()
        await peer.aclose()
        for close in closing:
            await close()
    return groups


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def report(groups: list[Group]) -> str:
    lines = [
        "| group | row | wall µs/cycle | CPU µs/cycle | fencelock ÷ this (rate) |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    ours_of = {}
    for group in groups:
        ours = statistics.median(group.ours.wall_us)
        ours_of[group.title] = ours
        for row in group.rows:
            ratio = statistics.median(row.wall_us) / ours
            lines.append(
                f"| {group.title} | {row.label} | {_spread(row.wall_us)} | "
                f"{_spread(row.cpu_us)} | {ratio:.2f}x |"
            )
    lines += ["", "| group | fencelock ÷ peer | the floor ÷ peer: the best any client reaches |"]
    lines.append("| --- | ---: | ---: |")
    for group in groups:
        if group.peer is None:
            continue
        peer = statistics.median(group.peer.wall_us)
        floor = statistics.median(group.floor.wall_us)
        ours = ours_of[group.title]
        lines.append(f"| {group.title} | {peer / ours:.2f}x | {peer / floor:.2f}x |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=0.5, help="one round's length")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ServerPool.under(Path(tmp)) as pool:
        single = pool.redis().address
        nodes = [pool.redis(name=f"floor-node-{i}").address for i in range(NODES)]
        print(f"{args.rounds} interleaved rounds of {args.seconds:g} s ...", file=sys.stderr)
        groups = sync_groups(single, nodes, args.rounds, args.seconds)
        groups += asyncio.run(async_groups(single, nodes, args.rounds, args.seconds))
    print(report(groups))
    return 0


if __name__ == "__main__":
    sys.exit(main())
