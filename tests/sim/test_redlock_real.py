"""The real Redlock backend in the simulator (:mod:`fencelock.sim.redlock`): its node
links and redis-py dial the virtual loop's ``create_connection`` and speak RESP to five
models of Redis; what they write is read as Redis reads it, and the nodes' replies are
written as Redis writes them, in RESP2, or RESP3 after ``HELLO 3`` (redis-py's)."""

from __future__ import annotations

from fencelock.backends.redis.resp import ReplyError, ReplyParser, pack
from fencelock.sim import Plan, run
from fencelock.sim.redis_model import CommandError, Status
from fencelock.sim.redlock import encode, split_commands


def test_commands_are_read_whole_however_they_are_written() -> None:
    packed = pack([b"SET", "k", 5]) + pack([b"GET", "k"])
    commands, rest = split_commands(packed[:-3])
    assert commands == [["SET", "k", "5"]]
    assert rest == pack([b"GET", "k"])[:-3]
    assert split_commands(rest + packed[-3:]) == ([["GET", "k"]], b"")


def test_replies_are_written_as_redis_writes_them() -> None:
    replies = [Status("OK"), 7, "v", None, ["a", None, 1], CommandError("ERR no")]
    parsed = ReplyParser().feed(b"".join(encode(reply) for reply in replies))
    assert parsed[:5] == ["OK", 7, b"v", None, [b"a", None, 1]]
    assert isinstance(parsed[5], ReplyError)
    assert parsed[5].text == "ERR no"
    assert encode(None, protocol=3) == b"_\r\n"
    assert encode({"proto": 3}, protocol=3) == b"%1\r\n$5\r\nproto\r\n:3\r\n"
    assert encode({"proto": 2}) == b"*2\r\n$5\r\nproto\r\n:2\r\n"


def test_inspect_and_list_through_redis_py_on_the_model_nodes() -> None:
    """A read-write lock reads its holders with inspect: redis-py's pipeline on each
    node (its handshake over RESP3 among what the nodes must answer as Redis 7.0 does:
    a command they do not model would end the run)."""
    outcome = run(Plan(seed=1, family="redlock", workload="rwlock", duration=10.0))
    assert outcome.ok, f"{outcome.violation}\n" + "\n".join(outcome.trace)
    assert outcome.grants > 5
