"""A stepped request reads its reply from the socket on the calling thread
(``blocking_call.reading_here``, as the etcd wire and aiomysql use it): over a real
socketpair, no server and no running loop (the reply parser is the etcd wire's)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from fencelock import blocking_call, clock
from fencelock.backends.etcd.wire import _Connection, _read_reply
from fencelock.backends.shared_loop import SharedLoop

REPLY = b'HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{"ok":true}'


@pytest.fixture
def connected() -> Iterator[tuple[_Connection, socket.socket, SharedLoop]]:
    shared = SharedLoop()
    ours, theirs = socket.socketpair()

    async def open_streams() -> _Connection:
        reader, writer = await asyncio.open_connection(sock=ours)
        return _Connection(reader, writer)

    connection = shared.run(open_streams())
    yield connection, theirs, shared
    connection.writer.close()
    theirs.close()
    shared.stop()


def _read_here(connection: _Connection, timeout: float) -> tuple[int, bytes, bool]:
    reading = blocking_call.reading_here(
        _read_reply(connection.reader),
        connection.reader,
        connection.writer.transport,
        timeout,
        "etcd",
    )
    with pytest.raises(StopIteration) as done:  # it never suspends: it reads here
        reading.send(None)
    return done.value.value  # type: ignore[no-any-return]


def _send_later(sock: socket.socket, pieces: list[bytes], gap: float) -> None:
    def send() -> None:
        for piece in pieces:
            time.sleep(gap)
            sock.sendall(piece)

    threading.Thread(target=send, daemon=True).start()


def test_a_reply_in_pieces_is_read_here_without_the_loop(
    connected: tuple[_Connection, socket.socket, SharedLoop],
) -> None:
    connection, theirs, shared = connected
    turns: list[bool] = []
    shared.loop.call_soon(lambda: turns.append(True))  # runs only if the loop turns
    _send_later(theirs, [REPLY[:9], REPLY[9:40], REPLY[40:]], 0.02)
    assert _read_here(connection, 5) == (200, b'{"ok":true}', True)
    assert turns == []


def test_no_reply_is_a_timeout_within_the_requests_time(
    connected: tuple[_Connection, socket.socket, SharedLoop],
) -> None:
    connection, _, _ = connected
    started = clock.now()
    with pytest.raises(TimeoutError):
        _read_here(connection, 0.2)
    assert 0.15 < clock.now() - started < 5


def test_the_calls_end_cuts_it_off_first(
    connected: tuple[_Connection, socket.socket, SharedLoop],
) -> None:
    connection, _, _ = connected
    with blocking_call.call_ends_at(clock.now() + 0.1), pytest.raises(blocking_call.CallEnded):
        _read_here(connection, 30)


def test_a_closed_socket_ends_the_reply(
    connected: tuple[_Connection, socket.socket, SharedLoop],
) -> None:
    connection, theirs, _ = connected
    _send_later(theirs, [REPLY[:20]], 0.01)
    threading.Timer(0.1, theirs.shutdown, (socket.SHUT_WR,)).start()
    with pytest.raises(asyncio.IncompleteReadError):
        _read_here(connection, 5)


def test_what_only_the_loop_can_finish_runs_there_within_the_time_left(
    connected: tuple[_Connection, socket.socket, SharedLoop],
) -> None:
    connection, theirs, shared = connected
    seen: list[bool] = []

    async def first_a_timer_then_the_reply() -> tuple[int, bytes, bool]:
        await asyncio.sleep(0.01)  # not the reader's wait: the loop's to finish
        seen.append(blocking_call.active())
        return await _read_reply(connection.reader)

    async def request() -> tuple[int, bytes, bool]:
        transport = connection.writer.transport
        reading = first_a_timer_then_the_reply()
        return await blocking_call.reading_here(reading, connection.reader, transport, 5, "test")

    _send_later(theirs, [REPLY], 0.05)
    assert shared.run_stepped(request()) == (200, b'{"ok":true}', True)
    assert seen == [True]  # waited for on the loop, in the same stepped call

    async def never_answered() -> tuple[int, bytes, bool]:
        transport = connection.writer.transport
        reading = first_a_timer_then_the_reply()
        return await blocking_call.reading_here(reading, connection.reader, transport, 0.2, "test")

    with pytest.raises(TimeoutError):
        shared.run_stepped(never_answered())
