"""The read-write lock's flows against a model lock server, in every interleaving
hypothesis finds: never a writer beside a reader or another writer, writers not
starved by readers who come after them, tokens from one counter."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from fencelock.engine.operations import Blocked, Give, Holding, ListHeld, Reply, Take
from fencelock.engine.rwlock import Op, RWFlow, RWNames, read_flow, write_flow

NAMES = RWNames("doc")


@dataclass
class Server:
    """Who holds which name, and the one token counter per name."""

    held: dict[str, int] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)


@dataclass
class Process:
    pid: int
    mode: str
    flow: RWFlow
    op: Op | None = None
    state: str = "running"  # running -> holding -> done
    gate_token: int = 0
    reader: str = ""  # the reader slot it holds


def _start(p: Process) -> None:
    p.op = next(p.flow)


def _step(p: Process, server: Server, now: float) -> bool:
    """Perform p's pending op if it can go now; False if it must wait."""
    op = p.op
    if isinstance(op, Take):
        if op.name in server.held:
            return False
        server.held[op.name] = p.pid
        server.tokens[op.name] = server.tokens.get(op.name, 0) + 1
        if op.name == NAMES.gate:
            p.gate_token = server.tokens[op.name]
        elif p.mode == "read":
            p.reader = op.name
        reply = Reply(now)
    elif isinstance(op, Give):
        assert server.held.pop(op.name) == p.pid
        reply = Reply(now)
    else:
        assert isinstance(op, ListHeld)
        names = sorted(n for n in server.held if n.startswith(op.prefix))
        reply = Reply(now, held=tuple(Holding(n, None) for n in names))
    try:
        p.op = p.flow.send(reply)
    except StopIteration as done:
        result: Blocked | None = done.value
        assert result is None  # the model never times out
        p.op, p.state = None, "holding"
    return True


def _flow(pid: int, mode: str) -> RWFlow:
    if mode == "read":
        return read_flow(NAMES, None, 0.0)
    return write_flow(NAMES, None, 0.0)


def _holds(p: Process, server: Server) -> bool:
    return p.state == "holding"


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(["read", "write"]), min_size=1, max_size=6),
    st.lists(st.integers(0, 50), min_size=200, max_size=200),
)
def test_readers_share_writers_are_alone_and_tokens_order(
    modes: list[str], choices: list[int]
) -> None:
    server = Server()
    procs = [Process(i, mode, _flow(i, mode)) for i, mode in enumerate(modes)]
    for p in procs:
        _start(p)
    entered: list[tuple[str, int]] = []
    for step, choice in enumerate(choices):
        live = [p for p in procs if p.state != "done"]
        if not live:
            break
        p = live[choice % len(live)]
        if p.state == "holding":  # it lets go now
            name = NAMES.gate if p.mode == "write" else p.reader
            assert server.held.pop(name) == p.pid
            p.state = "done"
            continue
        if _step(p, server, float(step)) and p.state == "holding":
            entered.append((p.mode, p.gate_token))
        holding = [q for q in procs if _holds(q, server)]
        writers = [q for q in holding if q.mode == "write"]
        assert len(writers) <= 1
        assert not writers or len(holding) == 1, "a writer beside someone"
    tokens = [token for _, token in entered]
    assert tokens == sorted(tokens)
    assert len(set(tokens)) == len(tokens)


def test_a_waiting_writer_holds_off_readers_who_come_after_it() -> None:
    server = Server()
    first = Process(0, "read", read_flow(NAMES, None, 0.0))
    writer = Process(1, "write", write_flow(NAMES, None, 0.0))
    late = Process(2, "read", read_flow(NAMES, None, 0.0))
    for p in (first, writer, late):
        _start(p)
    while first.state != "holding":
        _step(first, server, 0.0)
    waits_for_first = Take(NAMES.reader(0), None)
    while writer.op != waits_for_first:
        assert _step(writer, server, 0.0)
    assert server.held[NAMES.gate] == writer.pid  # the writer waits for the reader, gate held
    assert not _step(late, server, 0.0)  # the late reader waits behind the writer
    server.held.pop(NAMES.reader(0))  # the first reader lets go
    first.state = "done"
    while writer.state != "holding":
        assert _step(writer, server, 0.0)
    assert not _step(late, server, 0.0)  # still behind the writer while it writes
    server.held.pop(NAMES.gate)
    while late.state != "holding":
        assert _step(late, server, 0.0)
    assert late.gate_token > writer.gate_token > first.gate_token
