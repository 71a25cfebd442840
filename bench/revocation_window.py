"""How long two clients both believe they hold a lock when the server revokes a session.

On ``mysql://`` and ``postgresql+advisory://`` a lock ends with its connection and the
server hands it to a waiter at once. The holder polls ``lease.lost`` every 5 ms, a
contender loops ``acquire(timeout=0.2)``; the holder's connection is then ended from
the server's side (``KILL``, ``pg_terminate_backend``) or the server is SIGKILLed and
restarted on its data. The window is the time from the contender's grant to the moment
the holder saw its lease lost (0 when the holder knew first).

    python bench/revocation_window.py [--rounds 5] [--variant sync|async|both]
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections.abc import Callable

from harness.cli import parser
from harness.servers import server_pool

import fencelock
from fencelock.backends.mysql.options import DEFAULT_PREFIX
from fencelock.backends.mysql.statements import lock_name
from fencelock.backends.postgresql.advisory_statements import advisory_key
from fencelock.testing.process import ServerProcess

TTL = 30.0  # the renewal (every TTL/3) must not be what notices
POLL = 0.005


def _sql(url: str, query: str) -> list[tuple[object, ...]]:
    if url.startswith("mysql"):
        import pymysql

        from fencelock.engine.urls import parse_url

        p = parse_url(url)
        host, port = p.hosts[0]
        conn = pymysql.connect(
            host=host,
            port=port or 3306,
            user=p.username,
            password=p.password or "",
            autocommit=True,
        )
        try:
            with conn.cursor() as cur:
                cur.execute(query)
                return list(cur.fetchall())
        finally:
            conn.close()
    import psycopg

    plain = url.replace("postgresql+advisory://", "postgresql://", 1)
    with psycopg.connect(plain, autocommit=True) as pg:
        return list(pg.execute(query).fetchall())


def _end_session(url: str, name: str) -> None:
    if url.startswith("mysql"):
        (holder,) = _sql(url, f"SELECT IS_USED_LOCK('{lock_name(DEFAULT_PREFIX, name)}')")[0]
        _sql(url, f"KILL CONNECTION {int(str(holder))}")
        return
    key = advisory_key(name)
    high, low = (key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF
    _sql(
        url,
        "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "  # noqa: S608 (two ints)
        f"AND granted AND classid = {high} AND objid = {low}",
    )


def _crash(server: ServerProcess) -> Callable[[str, str], None]:
    def crash(url: str, name: str) -> None:
        server.kill()
        time.sleep(0.3)
        server.start()

    return crash


def one_round_sync(url: str, name: str, fault: Callable[[str, str], None]) -> float:
    holder_client = fencelock.connect(url)
    contender_client = fencelock.connect(url)
    try:
        lease = holder_client.lock(name, ttl=TTL).acquire()
        lost_at: list[float] = []
        granted_at: list[float] = []
        stop = threading.Event()

        def watch() -> None:
            while not stop.is_set():
                if lease.lost:
                    lost_at.append(time.monotonic())
                    return
                time.sleep(POLL)

        def contend() -> None:
            lock = contender_client.lock(name, ttl=TTL)
            while not stop.is_set():
                try:
                    taken = lock.acquire(timeout=0.2)
                except fencelock.LockTimeout:
                    continue
                except fencelock.FencelockError:
                    time.sleep(0.02)
                    continue
                granted_at.append(time.monotonic())
                taken.release()
                return

        threads = [threading.Thread(target=watch), threading.Thread(target=contend)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        fault(url, name)
        deadline = time.monotonic() + TTL
        while (not lost_at or not granted_at) and time.monotonic() < deadline:
            time.sleep(POLL)
        stop.set()
        for t in threads:
            t.join()
        return _window(lost_at, granted_at)
    finally:
        holder_client.close()
        contender_client.close()


def one_round_async(url: str, name: str, fault: Callable[[str, str], None]) -> float:
    async def run() -> float:
        async with fencelock.aconnect(url) as holder, fencelock.aconnect(url) as contender:
            lease = await holder.lock(name, ttl=TTL).acquire()
            lost_at: list[float] = []
            granted_at: list[float] = []

            async def watch() -> None:
                # No event to await: when ``lost`` turns is what this measures, to POLL.
                while not lease.lost:  # noqa: ASYNC110
                    await asyncio.sleep(POLL)
                lost_at.append(time.monotonic())

            async def contend() -> None:
                lock = contender.lock(name, ttl=TTL)
                while True:
                    try:
                        taken = await lock.acquire(timeout=0.2)
                    except fencelock.LockTimeout:
                        continue
                    except fencelock.FencelockError:
                        await asyncio.sleep(0.02)
                        continue
                    granted_at.append(time.monotonic())
                    await taken.release()
                    return

            tasks = [asyncio.create_task(watch()), asyncio.create_task(contend())]
            await asyncio.sleep(0.5)
            await asyncio.to_thread(fault, url, name)
            await asyncio.wait(tasks, timeout=TTL)
            for task in tasks:
                task.cancel()
            return _window(lost_at, granted_at)

    return asyncio.run(run())


def _window(lost_at: list[float], granted_at: list[float]) -> float:
    if not granted_at:
        return 0.0
    if not lost_at:
        return float("inf")
    return max(0.0, lost_at[0] - granted_at[0])


def main() -> None:
    made = parser(__doc__, "one round of each")
    made.add_argument("--rounds", type=int, default=5)
    made.add_argument("--variant", choices=("sync", "async", "both"), default="both")
    args = made.parse_args()
    if args.quick:
        args.rounds = 1
    variants = ("sync", "async") if args.variant == "both" else (args.variant,)
    with server_pool() as (pool, _tmp):
        pg, maria = pool.postgresql(), pool.mariadb()
        backends = [
            ("postgresql+advisory", pg.url.replace("postgresql://", "postgresql+advisory://"), pg),
            ("mysql", maria.url, maria),
        ]
        print(f"{'backend':22} {'variant':7} {'fault':10} {'median':>8} {'max':>8}")
        for label, url, server in backends:
            faults = {"session": _end_session, "crash": _crash(server)}
            for variant in variants:
                rounds = one_round_sync if variant == "sync" else one_round_async
                for fault_name, fault in faults.items():
                    windows = [
                        rounds(url, f"window/{fault_name}/{variant}/{i}", fault)
                        for i in range(args.rounds)
                    ]
                    print(
                        f"{label:22} {variant:7} {fault_name:10} "
                        f"{statistics.median(windows) * 1000:7.1f}ms {max(windows) * 1000:7.1f}ms",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
