"""The semaphore's flow against a model server, in the interleavings hypothesis picks:
never more than N permits, no lost wake-up (every waiter gets a permit once the holders
give theirs back), a mismatched count refused, tokens from the gate's one counter."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from fencelock.engine.operations import AwaitRelease, Blocked, Give, Holding, ListHeld, Reply, Take
from fencelock.engine.semaphore import (
    Arm,
    Disarm,
    Op,
    PermitMismatch,
    SemaphoreFlow,
    SemaphoreNames,
    acquire_flow,
    wake_after,
)

NAMES = SemaphoreNames("pool")


@dataclass
class Proc:
    pid: int
    flow: SemaphoreFlow
    op: Op | None = None
    state: str = "waiting"  # waiting -> holding -> done
    permit: str = ""
    result: Blocked | PermitMismatch | None = None


@dataclass
class Server:
    held: dict[str, int] = field(default_factory=dict)  # name -> pid


def _answer(p: Proc, op: Op, server: Server) -> Reply | None:
    held = server.held
    if isinstance(op, Take):
        if op.name in held:
            return Reply(0.0, granted=False) if op.timeout == 0 else None
        held[op.name] = p.pid
        if op.name.startswith(NAMES.permits):
            p.permit = op.name
        return Reply(0.0)
    if isinstance(op, Give):
        assert held.pop(op.name) == p.pid
        return Reply(0.0)
    if isinstance(op, ListHeld):
        names = sorted(n for n in held if n.startswith(op.prefix))
        return Reply(0.0, held=tuple(Holding(n, None) for n in names))
    if isinstance(op, Arm):
        held[op.name] = p.pid  # the gate holder evicts a stale bell
        return Reply(0.0)
    if isinstance(op, Disarm):
        if held.get(op.name) == p.pid:
            del held[op.name]
        return Reply(0.0)
    assert isinstance(op, AwaitRelease)
    return None if op.name in held else Reply(0.0)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 3), st.integers(1, 6), st.lists(st.integers(0, 30), max_size=300))
def test_never_more_than_n_and_no_lost_wakeup(
    permits: int, procs_count: int, choices: list[int]
) -> None:
    server = Server()
    procs = [Proc(i, acquire_flow(NAMES, permits, None, 0.0)) for i in range(procs_count)]
    for p in procs:
        p.op = next(p.flow)
    for choice in [*choices, *([0] * 2000)]:
        live = [p for p in procs if p.state != "done"]
        if not live:
            break
        runnable = [p for p in live if p.state == "holding" or _answer_would_go(p, server)]
        assert runnable, "deadlock: everybody waits (a lost wake-up)"
        p = runnable[choice % len(runnable)]
        if p.state == "holding":
            del server.held[p.permit]
            server.held.pop(NAMES.bell, None)  # the release rings the bell
            p.state = "done"
            continue
        assert p.op is not None
        reply = _answer(p, p.op, server)
        assert reply is not None
        try:
            p.op = p.flow.send(reply)
        except StopIteration as done:
            p.result, p.op = done.value, None
            assert p.result is None
            p.state = "holding"
        assert len([n for n in server.held if n.startswith(NAMES.permits)]) <= permits
    assert all(p.state == "done" for p in procs)


def _answer_would_go(p: Proc, server: Server) -> bool:
    op = p.op
    if isinstance(op, Take):
        return op.name not in server.held or op.timeout == 0
    if isinstance(op, AwaitRelease):
        return op.name not in server.held
    return True


def test_a_mismatched_count_is_refused() -> None:
    server = Server(held={NAMES.permit(3, 0): 9})
    p = Proc(0, acquire_flow(NAMES, 5, None, 0.0))
    p.op = next(p.flow)
    try:
        while True:
            reply = _answer(p, p.op, server)
            assert reply is not None
            p.op = p.flow.send(reply)
    except StopIteration as done:
        said = done.value
    assert said == PermitMismatch(3)
    assert NAMES.gate not in server.held  # given back


def test_the_wait_ends_when_the_first_permit_would_expire() -> None:
    assert wake_after((Holding("a", 3.0), Holding("b", 1.5), Holding("c", None))) == 1.5 + 0.01
    assert wake_after((Holding("a", None),)) is None
