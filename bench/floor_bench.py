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

import asyncio
import select
import socket
import statistics
import sys
from dataclasses import dataclass
from typing import Any

from harness.cli import add_rounds, parser
from harness.lockers import acquire_release, afencelock_cycle, fencelock_cycle
from harness.peers import optional, say
from harness.rounds import (
    AsyncCloser,
    AsyncCycle,
    AsyncRunner,
    Opener,
    RateResult,
    SyncRunner,
    interleave,
)
from harness.servers import server_pool

import fencelock

PING = b"*1\r\n$4\r\nPING\r\n"
PONG = b"+PONG\r\n"
NODES = 5
TTL = 30
BATCH = 50


@dataclass
class Group:
    title: str
    ours: RateResult
    peer: RateResult | None
    floor: RateResult
    rows: list[RateResult]


# --------------------------------------------------------------------------- floors


def _connect(address: str) -> socket.socket:
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def floor_runner(addresses: list[str], rounds: int) -> SyncRunner:
    """``rounds`` round trips, each a PING to every socket at once, then every reply."""
    socks = [_connect(address) for address in addresses]

    def close() -> None:
        for sock in socks:
            sock.close()

    if len(socks) == 1:
        (only,) = socks

        def one() -> None:
            for _ in range(rounds):
                only.sendall(PING)
                only.recv(64)

        return SyncRunner(one, close)

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

    return SyncRunner(every, close)


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


def afloor_runner(addresses: list[str], rounds: int) -> AsyncRunner:
    """:func:`floor_runner` on asyncio protocols (the least asyncio can do a round)."""

    async def setup() -> tuple[AsyncCycle, AsyncCloser]:
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

        async def close() -> None:
            for transport in transports:
                transport.close()

        return cycle, close

    return AsyncRunner(setup)


# --------------------------------------------------------------------------- the locks


def fencelock_runner(url: str) -> SyncRunner:
    client = fencelock.connect(url)
    return SyncRunner(fencelock_cycle(client.lock("floor/x", ttl=TTL), None), client.close)


def afencelock_runner(url: str) -> AsyncRunner:
    async def setup() -> tuple[AsyncCycle, AsyncCloser]:
        client = fencelock.aconnect(url)
        return afencelock_cycle(client.lock("floor/x", ttl=TTL), None), client.aclose

    return AsyncRunner(setup)


def redis_py_runner(single: str) -> SyncRunner:
    import redis

    peer = redis.Redis.from_url(f"redis://{single}/0")
    return SyncRunner(acquire_release(peer.lock("floor/peer", timeout=TTL)), peer.close)


def aredis_py_runner(single: str) -> AsyncRunner:
    async def setup() -> tuple[AsyncCycle, AsyncCloser]:
        import redis.asyncio

        peer = redis.asyncio.Redis.from_url(f"redis://{single}/0")
        lock = peer.lock("floor/peer", timeout=TTL)

        async def cycle() -> None:
            await lock.acquire()
            await lock.release()

        return cycle, peer.aclose

    return AsyncRunner(setup)


def redlock_py_runner(module: Any, addresses: list[str]) -> SyncRunner:
    nodes = [{"host": a.rsplit(":", 1)[0], "port": int(a.rsplit(":", 1)[1])} for a in addresses]
    manager = module.Redlock(nodes)

    def cycle() -> None:
        held = manager.lock("floor/peer", TTL * 1000)
        assert held is not False, "redlock-py did not take a free lock"
        manager.unlock(held)

    return SyncRunner(cycle)


def aioredlock_runner(module: Any, addresses: list[str]) -> AsyncRunner:
    async def setup() -> tuple[AsyncCycle, AsyncCloser]:
        nodes = [{"host": a.rsplit(":", 1)[0], "port": int(a.rsplit(":", 1)[1])} for a in addresses]
        manager = module.Aioredlock(nodes)

        async def cycle() -> None:
            held = await manager.lock("floor/peer", lock_timeout=TTL)
            await manager.unlock(held)

        return cycle, manager.destroy

    return AsyncRunner(setup)


# --------------------------------------------------------------------------- the run


def group(title: str, sides: list[tuple[str, Opener]], rounds: int, seconds: float) -> Group:
    """Interleaved rounds of fencelock, the peer (if any) and the floor, in that order."""
    results = [RateResult(label, label) for label, _ in sides]
    opened = list(zip(results, (opener for _, opener in sides), strict=True))
    interleave(opened, rounds, seconds, warmup=seconds / 5, batch=BATCH)
    peer = results[1] if len(results) > 2 else None
    return Group(title, results[0], peer, results[-1], results)


def groups(single: str, nodes: list[str], rounds: int, seconds: float) -> list[Group]:
    redlock_url = "redlock://" + ",".join(nodes)
    redlock_py, aioredlock = optional("redlock"), optional("aioredlock")
    plans: list[tuple[str, list[tuple[str, Opener] | None]]] = [
        ("Redis, sync", [
            ("fencelock redis://", lambda: fencelock_runner(f"redis://{single}/0")),
            ("redis-py Lock", lambda: redis_py_runner(single)),
            ("floor: 2 round trips (PING, raw socket)", lambda: floor_runner([single], 2)),
        ]),
        ("Redlock, 5 nodes, sync", [
            ("fencelock redlock:// (3 rounds)", lambda: fencelock_runner(redlock_url)),
            ("redlock-py (2 rounds)", lambda: redlock_py_runner(redlock_py, nodes))
            if redlock_py else None,
            ("floor: 3 rounds of PING to 5 nodes", lambda: floor_runner(nodes, 3)),
        ]),
        ("Redis, asyncio", [
            ("fencelock redis:// asyncio", lambda: afencelock_runner(f"redis://{single}/0")),
            ("redis.asyncio Lock", lambda: aredis_py_runner(single)),
            ("floor: 2 round trips (PING, asyncio protocol)", lambda: afloor_runner([single], 2)),
        ]),
        ("Redlock, 5 nodes, asyncio", [
            ("fencelock redlock:// asyncio (3 rounds)", lambda: afencelock_runner(redlock_url)),
            ("aioredlock (2 rounds)", lambda: aioredlock_runner(aioredlock, nodes))
            if aioredlock else None,
            ("floor: 3 rounds of PING to 5 nodes", lambda: afloor_runner(nodes, 3)),
        ]),
    ]  # fmt: skip
    return [
        group(title, [side for side in sides if side is not None], rounds, seconds)
        for title, sides in plans
    ]


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def report(found: list[Group]) -> str:
    lines = [
        "| group | row | wall µs/cycle | CPU µs/cycle | fencelock ÷ this (rate) |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for g in found:
        ours = statistics.median(g.ours.wall_us)
        for row in g.rows:
            ratio = statistics.median(row.wall_us) / ours
            lines.append(
                f"| {g.title} | {row.label} | {_spread(row.wall_us)} | "
                f"{_spread(row.cpu_us)} | {ratio:.2f}x |"
            )
    lines += ["", "| group | fencelock ÷ peer | the floor ÷ peer: the best any client reaches |"]
    lines.append("| --- | ---: | ---: |")
    for g in found:
        if g.peer is None:
            continue
        peer = statistics.median(g.peer.wall_us)
        floor = statistics.median(g.floor.wall_us)
        ours = statistics.median(g.ours.wall_us)
        lines.append(f"| {g.title} | {peer / ours:.2f}x | {peer / floor:.2f}x |")
    return "\n".join(lines)


def main() -> int:
    made = parser(__doc__, "2 rounds of 0.1 s: a smoke run, no figures to quote")
    add_rounds(made, rounds=5, seconds=0.5)
    args = made.parse_args()
    if args.quick:
        args.rounds, args.seconds = 2, 0.1
    with server_pool() as (pool, _tmp):
        single = pool.redis().address
        nodes = [pool.redis(name=f"floor-node-{i}").address for i in range(NODES)]
        say(f"{args.rounds} interleaved rounds of {args.seconds:g} s ...")
        found = groups(single, nodes, args.rounds, args.seconds)
    print(report(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
