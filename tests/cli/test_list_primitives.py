"""``fencelock list`` and ``status`` show each coordination primitive's holders."""

from __future__ import annotations

import json

import fencelock
from tests.cli.conftest import fencelock_cmd


def test_list_and_status_show_the_primitives(env: dict[str, str]) -> None:
    with fencelock.connect(env["FENCELOCK_URL"]) as client:
        reading = client.rw_lock("docs/a").read().acquire()
        permit = client.semaphore("pool/x", permits=3).acquire()
        leading = client.election("svc/leader").campaign(value="10.0.0.1:80")
        assert client.latch("batch/1").try_set_count(2)
        listed = fencelock_cmd(env, "list").stdout.splitlines()
        assert listed == [
            "batch/1: latch, count 2",
            "docs/a: read-write lock, 1 reader(s)",
            f"pool/x: semaphore, 1 of 3 permits held (tokens {permit.token})",
            f"svc/leader: election, leader '10.0.0.1:80' (term {leading.term})",
        ]
        status = json.loads(fencelock_cmd(env, "status", "--json", "pool/x").stdout)
        assert status["primitive"] == {
            "name": "pool/x", "kind": "semaphore", "held": 1, "permits": 3,
            "tokens": [permit.token],
        }  # fmt: skip
        human = fencelock_cmd(env, "status", "docs/a").stdout
        assert human.splitlines() == ["docs/a: read-write lock, 1 reader(s)"]
        reading.release()
        permit.release()
        leading.resign()
        assert fencelock_cmd(env, "list").stdout.splitlines() == ["batch/1: latch, count 2"]
