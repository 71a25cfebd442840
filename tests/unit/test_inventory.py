"""``status``/``list`` fold the parts of each coordination primitive into one line."""

from __future__ import annotations

from fencelock.backends.base import LockInfo
from fencelock.cli.inventory import describe_entry, group
from fencelock.primitives.election import _ElectionBase


def held(name: str, token: int = 1) -> LockInfo:
    return LockInfo(name, "0" * 40, token, 10.0)


def test_each_primitive_is_one_line() -> None:
    announced = _ElectionBase("svc/leader", 10)._announcement("10.0.0.1:80")
    entries = group(
        [
            held("plain/lock", 3),
            held("docs/a.rw/r/0", 4),
            held("docs/a.rw/r/1", 5),
            held("docs/b.rw/gate", 9),
            held("pool/x.sem/p/3/0", 2),
            held("pool/x.sem/p/3/2", 6),
            held("pool/x.sem/bell", 1),
            held("batch/1.latch/closed"),
            held("batch/1.latch/c/0"),
            held("batch/1.latch/c/1"),
            held("svc/leader", 7),
            held(announced),
            LockInfo("free/one", None, 4, None),
        ]
    )
    lines = {e.name: describe_entry(e, "plain") for e in entries}
    assert lines == {
        "plain/lock": "plain",
        "docs/a": "docs/a: read-write lock, 2 reader(s)",
        "docs/b": "docs/b: read-write lock, written (token 9)",
        "pool/x": "pool/x: semaphore, 2 of 3 permits held, waiters (tokens 2, 6)",
        "batch/1": "batch/1: latch, count 2",
        "svc/leader": "svc/leader: election, leader '10.0.0.1:80' (term 7)",
    }
    kinds = {e.name: e.to_dict() for e in entries}
    assert kinds["pool/x"] == {
        "name": "pool/x", "kind": "semaphore", "held": 2, "permits": 3, "tokens": [2, 6]
    }  # fmt: skip
    assert kinds["svc/leader"]["term"] == 7


def test_two_announcements_name_no_value() -> None:
    election = _ElectionBase("svc/leader", 10)
    stale, new = election._announcement("old"), election._announcement("new")
    (entry,) = group([held("svc/leader", 7), held(stale), held(new)])
    assert entry.kind == "election"
    assert entry.value is None  # a deposed one's is still there
