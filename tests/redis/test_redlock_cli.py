"""The ``fencelock`` command on ``redlock://`` with nodes hung or unreachable.

It says one thing, once, with the documented exit code: no asyncio noise when it
exits without closing the client, and no "no locks held" when no node answered.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.servers import free_port

FENCELOCK = str(Path(sys.executable).parent / "fencelock")
UNAVAILABLE, NOT_ACQUIRED = 69, 75


def redlock_url(ports: list[int]) -> str:
    return "redlock://" + ",".join(f"127.0.0.1:{p}" for p in ports) + "?timeout=0.2"


def fencelock_cmd(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "FENCELOCK_URL"}
    return subprocess.run(
        [FENCELOCK, *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_list_with_every_node_unreachable_fails_with_69() -> None:
    ports = [free_port() for _ in range(3)]
    done = fencelock_cmd("list", "--url", redlock_url(ports))
    assert done.returncode == UNAVAILABLE, done
    assert "no locks held" not in done.stdout
    assert "3 of 3 nodes unavailable" in done.stderr, done.stderr
