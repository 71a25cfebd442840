"""A Redlock step's decision rule: over exactly when a quorum said yes or no longer can.

The nodes are stand-ins that keep each request's callback; the test answers them in
a random order with random answers, as the connections would.
"""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from fencelock.backends.redis.resp import ReplyError, Script
from fencelock.backends.redlock.round import PENDING, Round, boolean_reply, phase_one_reply
from fencelock.engine import redlock as plan
from fencelock.engine.redlock import quorum
from fencelock.errors import BackendUnavailable

SCRIPT = Script("return 1")
answers = st.one_of(
    st.sampled_from([1, 0]),
    st.just(ReplyError("ERR boom")),
    st.just(BackendUnavailable("Redis at h:1 did not answer within 0.1s")),
)


class Node:
    """Keeps the callback of the request sent to it."""

    def __init__(self, index: int) -> None:
        self.where = f"Redis at h:{index}"
        self.done: Any = None

    def send(self, command: bytes, done: Any, script: Script | None = None) -> None:
        self.done = done


def is_yes(reply: Any) -> bool:
    return reply is True


def counts_as_no(reply: Any, errors_say_no: bool) -> bool:
    return reply is False or (errors_say_no and isinstance(reply, plan.NodeError))


@settings(max_examples=300)
@given(
    st.integers(3, 7).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(answers, min_size=n, max_size=n),
            st.permutations(range(n)),
            st.booleans(),
        )
    )
)
def test_decided_exactly_when_the_quorum_rule_says(
    case: tuple[int, list[Any], list[int], bool],
) -> None:
    n, raw, order, errors_say_no = case

    async def run() -> None:
        nodes = [Node(i) for i in range(n)]
        late: list[int] = []
        step = Round(nodes, quorum(n), boolean_reply, errors_say_no, lambda i, r: late.append(i))  # type: ignore[arg-type]
        step.send(b"EVALSHA", SCRIPT)
        seen: list[int] = []
        decided_after: int | None = None
        for i in order:
            nodes[i].done(raw[i])
            if decided_after is None:
                seen.append(i)
                replies = [boolean_reply(raw[j], nodes[j].where) for j in seen]
                yes = sum(map(is_yes, replies))
                no = sum(counts_as_no(r, errors_say_no) for r in replies)
                should = len(seen) == n or yes >= quorum(n) or no > n - quorum(n)
                assert step.decided == should
                if should:
                    decided_after = len(seen)
        outcome = await step.outcome()
        after = [i for i in order if i not in seen]
        assert [i for i in range(n) if outcome[i] is PENDING] == sorted(after)
        # late replies are passed on; late failures carry no news and are dropped
        assert late == [i for i in after if not isinstance(raw[i], BackendUnavailable)]

    asyncio.run(run())


def test_phase_one_answers() -> None:
    assert phase_one_reply([1, b"1763772000000001"], "w") == plan.NodeWon(1763772000000001)
    assert phase_one_reply([0, 1500], "w") == plan.NodeBusy(1.5)
    assert phase_one_reply([0, -1], "w") == plan.NodeBusy(None)
    error = phase_one_reply(ReplyError("WRONGPASS invalid"), "Redis at h:1")
    assert error == plan.NodeError("Redis at h:1 refused the credentials: WRONGPASS invalid")


def test_an_answer_of_the_wrong_shape_is_that_nodes_failure() -> None:
    async def run() -> list[Any]:
        nodes = [Node(i) for i in range(3)]
        step = Round(nodes, 2, phase_one_reply)  # type: ignore[arg-type]
        step.send(b"EVALSHA", SCRIPT)
        for node in nodes:
            node.done(b"surprise")
        return await step.outcome()

    first, second, third = asyncio.run(run())
    assert isinstance(first, plan.NodeError)
    assert "h:0 sent an unexpected reply" in first.reason
    assert isinstance(second, plan.NodeError)
    assert "h:1 sent an unexpected reply" in second.reason
    assert third is PENDING  # two failures of three: decided without it


def test_settled_waits_for_the_answers_after_the_decision() -> None:
    """For an error message that counts every node, not only those read at the decision."""

    async def run() -> tuple[list[Any], list[Any]]:
        nodes = [Node(i) for i in range(3)]
        step = Round(nodes, 2, boolean_reply)  # type: ignore[arg-type]
        step.send(b"EVALSHA", SCRIPT)
        down = BackendUnavailable("cannot reach Redis at h:0")
        nodes[0].done(down)
        nodes[1].done(down)
        decided = await step.outcome()
        waiting = asyncio.ensure_future(step.settled())
        await asyncio.sleep(0)
        assert not waiting.done()
        nodes[2].done(BackendUnavailable("Redis at h:2 did not answer within 0.1s"))
        return decided, await waiting

    decided, settled = asyncio.run(run())
    assert decided[2] is PENDING
    assert all(isinstance(r, plan.NodeError) and r is not PENDING for r in settled)
    assert "h:2 did not answer" in settled[2].reason
