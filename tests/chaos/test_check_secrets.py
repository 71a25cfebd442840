"""``fencelock check`` keeps a backend password out of its clients' command lines.

Any user can read ``/proc/PID/cmdline`` (``ps``); the clients get their settings,
URL included, on their standard input instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fencelock.testing import RedisServer, ServerPool
from tests.chaos.check_runs import FENCELOCK, children

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc"),
    pytest.mark.timeout(120),
]

PASSWORD = "s3cret-check-pw"


@pytest.fixture
def password_redis(tmp_path: Path) -> Iterator[RedisServer]:
    with ServerPool.under(tmp_path) as pool:
        yield pool.redis("--requirepass", PASSWORD, name="check-auth")


def _children(parent: int, marker: str) -> dict[int, bytes]:
    """The live children of ``parent`` whose command line contains ``marker``."""
    found = {}
    for pid in children(parent):
        with contextlib.suppress(OSError):
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            if marker.encode() in cmdline:
                found[pid] = cmdline
    return found


def _environ(pid: int) -> bytes:
    try:
        return (Path("/proc") / str(pid) / "environ").read_bytes()
    except OSError:
        return b""


def test_clients_get_the_url_without_it_showing_in_ps(
    password_redis: RedisServer, tmp_path: Path
) -> None:
    url = f"redis://:{PASSWORD}@127.0.0.1:{password_redis.port}/0"
    env = {k: v for k, v in os.environ.items() if k != "FENCELOCK_URL"}
    args = ["--url", url, "--clients", "2", "--duration", "2", "--nemesis", "none"]
    check = subprocess.Popen(
        [str(FENCELOCK), "check", *args, "--json", "--report", str(tmp_path / "report")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    seen: dict[int, bytes] = {}
    environs: list[bytes] = []
    while check.poll() is None and len(seen) < 2:
        for pid, cmdline in _children(check.pid, "fencelock.check.workloads").items():
            if pid not in seen:
                seen[pid] = cmdline
                environs.append(_environ(pid))
        time.sleep(0.02)
    out, err = check.communicate(timeout=100)
    assert check.returncode == 0, err.decode()
    assert json.loads(out)["result"]["ok"], out.decode()[:2000]
    assert len(seen) == 2, f"found the clients {sorted(seen)}; {err.decode()}"
    for cmdline in seen.values():
        assert PASSWORD.encode() not in cmdline, cmdline
    for environ in environs:
        assert PASSWORD.encode() not in environ
