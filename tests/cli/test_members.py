"""``fencelock members NAME`` (and ``--watch``), and groups in ``list``."""

from __future__ import annotations

import json
import subprocess
import sys

import fencelock
from tests.cli.conftest import fencelock_cmd


def test_members_lists_the_live_members(env: dict[str, str]) -> None:
    assert fencelock_cmd(env, "members", "workers").stdout.splitlines() == ["workers: 0 member(s)"]
    with fencelock.connect(env["FENCELOCK_URL"]) as client:
        group = client.group("workers")
        one = group.join("w1", data="10.0.0.1:80")
        two = group.join("w2")
        human = fencelock_cmd(env, "members", "workers").stdout.splitlines()
        assert human[0] == "workers: 2 member(s)"
        assert human[1].startswith(f"  w1 '10.0.0.1:80' (token {one.token}, ")
        assert human[2].startswith(f"  w2 (token {two.token}, ")
        doc = json.loads(fencelock_cmd(env, "members", "--json", "workers").stdout)
        assert [(m["member"], m["data"], m["token"]) for m in doc["members"]] == [
            ("w1", "10.0.0.1:80", one.token),
            ("w2", None, two.token),
        ]
        listed = fencelock_cmd(env, "list").stdout.splitlines()
        assert listed == ["workers: group, 2 member(s) (w1, w2)"]
        one.leave()
        two.leave()


def test_watch_prints_who_joins_and_leaves(env: dict[str, str]) -> None:
    watcher = subprocess.Popen(
        [sys.executable, "-c", "from fencelock.cli import main; main()",
         "members", "--watch", "--json", "--interval", "0.05", "pool"],
        env=env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert watcher.stdout is not None
        first = json.loads(watcher.stdout.readline())
        assert first["members"] == []
        with fencelock.connect(env["FENCELOCK_URL"]) as client:
            member = client.group("pool").join("w9", data="x")
            joined = json.loads(watcher.stdout.readline())
            assert joined["joined"] == ["w9"]
            assert joined["members"][0]["data"] == "x"
            member.leave()
            left = json.loads(watcher.stdout.readline())
            assert left["left"] == ["w9"]
            assert left["members"] == []
    finally:
        watcher.terminate()
        watcher.wait(30)
