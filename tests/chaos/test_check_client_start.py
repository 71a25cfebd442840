"""A check client started while its server is down waits for it instead of failing the run.

The ``kill`` nemesis starts a replacement client at any moment, also while the
``server`` or ``pause`` nemesis has the server down; the replacement used to fail
``connect()`` at once, and the whole run ended with exit 70 and no verdict.
"""

from __future__ import annotations

import selectors
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fencelock.check.workloads import ClientSpec, create_resource
from fencelock.testing import RedisServer, ServerPool

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    with ServerPool.under(tmp_path) as pool:
        yield pool.redis(name="client-start")


def _spec(url: str, tmp_path: Path) -> ClientSpec:
    resource = tmp_path / "resource.db"
    create_resource(resource)
    return ClientSpec(
        client=0,
        url=url,
        workload="register",
        lock_name="client-start",
        resource=str(resource),
        history=str(tmp_path / "history-0.jsonl"),
        ttl=0.5,
        work=0.01,
        fencing=True,
        seed=0,
    )


def _start(spec: ClientSpec) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "fencelock.check.workloads", spec.history],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None
    proc.stdin.write(spec.to_json().encode() + b"\n")
    proc.stdin.flush()
    return proc


def _first_line(proc: subprocess.Popen[bytes], timeout: float) -> bytes | None:
    """The client's first line on stdout within ``timeout``, or None."""
    assert proc.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            return None
    return proc.stdout.readline()


def test_a_client_started_while_the_server_is_paused_waits_for_it(
    redis: RedisServer, tmp_path: Path
) -> None:
    spec = _spec(f"redis://127.0.0.1:{redis.port}/0?timeout=0.25", tmp_path)
    redis.pause()
    try:
        proc = _start(spec)
        try:
            assert _first_line(proc, 2.0) is None  # not ready, not gone: waiting
            assert proc.poll() is None, proc.communicate()[1].decode(errors="replace")
        finally:
            redis.resume()
        line = _first_line(proc, 60.0)
        assert line == b"ready\n", proc.stderr.read().decode() if proc.stderr else ""
    finally:
        proc.kill()
        proc.communicate()
