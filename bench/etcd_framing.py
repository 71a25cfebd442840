"""What h11 would cost as the etcd wire's HTTP/1.1 framing, against an etcd lock cycle.

Issue 24 asked for h11 (the framing httpx stands on) in place of the hand parser in
``backends/etcd/wire.py`` if it costs under 3 % of an etcd lock cycle. This measures, in
one run and as CPU time (this shared 2-core machine moves wall-clock rates by ±40 %):

1. the framing of one request and its reply, ours and h11's, on a typical etcd reply;
2. the CPU one uncontended acquire-and-release costs against a real etcd (started
   here), and how many HTTP requests it sends;

and reports h11's extra CPU per lock cycle as a share of that cycle.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import h11
from harness.cli import parser
from harness.servers import backend_url, server_pool

import fencelock
from fencelock.backends.etcd import wire

BODY = (
    b'{"header":{"cluster_id":"14841639068965178418","member_id":"10276657743932975437",'
    b'"revision":"1742","raft_term":"2"},"succeeded":true,"responses":[{"response_put":'
    b'{"header":{"revision":"1742"}}},{"response_range":{"header":{"revision":"1742"},'
    b'"kvs":[{"key":"ZmVuY2Vsb2NrL2JlbmNo","create_revision":"1742","mod_revision":"1742",'
    b'"version":"1","value":"MTc0MiBhYmNk","lease":"7587862072012370186"}],"count":"1"}}]}'
)
REPLY = (
    b"HTTP/1.1 200 OK\r\nAccess-Control-Allow-Headers: accept, content-type, authorization\r\n"
    b"Access-Control-Allow-Methods: POST, GET, OPTIONS, PUT, DELETE\r\n"
    b"Access-Control-Allow-Origin: *\r\nContent-Type: application/json\r\n"
    b"Grpc-Metadata-Content-Type: application/grpc\r\n"
    b"Date: Fri, 27 Nov 2026 04:00:00 GMT\r\nContent-Length: %d\r\n\r\n%b"
) % (len(BODY), BODY)
REQUEST_BODY = b'{"compare":[{"key":"ZmVuY2Vsb2NrL2JlbmNo","target":"CREATE"}]}'


def cpu_per_call(run: Callable[[int], None], calls: int) -> float:
    began = time.process_time()
    run(calls)
    return (time.process_time() - began) / calls


def ours(calls: int) -> None:
    endpoint = wire._endpoint("http://127.0.0.1:2379")

    async def frame_all() -> None:
        for _ in range(calls):
            wire._request("POST", endpoint, "/v3/kv/txn", REQUEST_BODY, {})
            reader = asyncio.StreamReader()
            reader.feed_data(REPLY)
            await wire._read_reply(reader)

    asyncio.run(frame_all())


def with_h11(calls: int) -> None:
    connection = h11.Connection(h11.CLIENT)
    for _ in range(calls):
        connection.send(
            h11.Request(
                method="POST",
                target="/v3/kv/txn",
                headers=[
                    ("Host", "127.0.0.1:2379"),
                    ("Content-Type", "application/json"),
                    ("Content-Length", str(len(REQUEST_BODY))),
                ],
            )
        )
        connection.send(h11.Data(data=REQUEST_BODY))
        connection.send(h11.EndOfMessage())
        connection.receive_data(REPLY)
        body = bytearray()
        while True:
            event = connection.next_event()
            if isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                break
        connection.start_next_cycle()


def lock_cycle(url: str, cycles: int) -> tuple[float, float]:
    """CPU seconds per acquire-and-release, and HTTP requests per cycle."""
    sent = 0
    send = wire.Wire.send

    async def counting(self: wire.Wire, *args: object, **kwargs: object) -> object:
        nonlocal sent
        sent += 1
        return await send(self, *args, **kwargs)  # type: ignore[arg-type]

    wire.Wire.send = counting  # type: ignore[assignment,method-assign]
    try:
        with fencelock.connect(url) as client:
            lock = client.lock("bench/framing", ttl=30)
            for _ in range(20):  # warm: connections open, scripts and leases in place
                lock.acquire().release()
            sent, began = 0, time.process_time()
            for _ in range(cycles):
                lock.acquire().release()
            return (time.process_time() - began) / cycles, sent / cycles
    finally:
        wire.Wire.send = send  # type: ignore[method-assign]


def main() -> None:
    made = parser(__doc__, "1 round of 1,000 calls and 50 cycles: a smoke run")
    made.add_argument("--calls", type=int, default=20_000)
    made.add_argument("--cycles", type=int, default=500)
    made.add_argument("--rounds", type=int, default=3)
    args = made.parse_args()
    if args.quick:
        args.calls, args.cycles, args.rounds = 1000, 50, 1
    with server_pool() as (pool, tmp):
        url = backend_url(pool, tmp, "etcd")
        ours_cpu, h11_cpu, cycle_cpu, requests = [], [], [], 0.0
        for _ in range(args.rounds):  # interleaved rounds
            ours_cpu.append(cpu_per_call(ours, args.calls))
            h11_cpu.append(cpu_per_call(with_h11, args.calls))
            cpu, requests = lock_cycle(url, args.cycles)
            cycle_cpu.append(cpu)
    best_ours, best_h11, best_cycle = min(ours_cpu), min(h11_cpu), min(cycle_cpu)
    extra = requests * (best_h11 - best_ours)
    ours_us, h11_us = best_ours * 1e6, best_h11 * 1e6
    print(f"framing, one request and reply: ours {ours_us:.1f} us, h11 {h11_us:.1f} us CPU")
    print(f"etcd lock cycle: {best_cycle * 1e6:.0f} us CPU, {requests:.2f} HTTP requests")
    print(f"h11 would add {extra * 1e6:.1f} us CPU a cycle: {100 * extra / best_cycle:.1f} % of it")


if __name__ == "__main__":
    main()
