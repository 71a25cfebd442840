"""``fencelock stats``: the five metrics of running processes, scraped and added up."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

from tests.cli.conftest import fencelock_cmd

# A process that takes locks (memory://, in itself) and serves its metrics until stdin closes.
SERVING = textwrap.dedent(
    """
    import sys, threading, time
    import fencelock, fencelock.metrics
    from fencelock.fencing import MemoryGuard
    server = fencelock.metrics.serve(0)
    with fencelock.connect("memory://stats") as client:
        def work():
            for _ in range(10):
                with client.lock("orders/1", ttl=5, timeout=30):
                    time.sleep(0.002)
        threads = [threading.Thread(target=work) for _ in range(3)]
        [t.start() for t in threads]; [t.join() for t in threads]
        with client.lock("reports/nightly"):
            with fencelock.connect("memory://stats") as other:
                try:
                    other.lock("reports/nightly").acquire(timeout=0.05)
                except fencelock.LockTimeout:
                    pass
        guard = MemoryGuard()
        guard.accept("seats/12A", 5)
        try:
            guard.accept("seats/12A", 4)
        except fencelock.StaleToken:
            pass
        print(f"http://127.0.0.1:{server.server_port}/metrics", flush=True)
        sys.stdin.read()
    """
)


@pytest.fixture
def served() -> Iterator[list[str]]:
    """Two processes serving their metrics; their addresses."""
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", SERVING],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        yield [p.stdout.readline().strip() for p in processes if p.stdout is not None]
    finally:
        for process in processes:
            process.communicate(timeout=30)


def test_stats_adds_up_the_processes_and_marks_the_thresholds(
    env: dict[str, str], served: list[str]
) -> None:
    shown = fencelock_cmd(env, "stats", *served, "--json")
    assert shown.returncode == 0, shown.stderr
    by_prefix = {entry["prefix"]: entry for entry in json.loads(shown.stdout)}
    orders, reports, seats = by_prefix["orders"], by_prefix["reports"], by_prefix["seats"]
    assert orders["acquisitions"] == 60  # 2 processes x 3 threads x 10
    assert reports["acquisitions"] == 2
    assert reports["timeout_rate"] == pytest.approx(0.5)
    assert any("timeouts" in warning for warning in reports["warnings"])
    assert seats["fencing_rejections"] == 2
    assert any("fencing" in warning for warning in seats["warnings"])
    table = fencelock_cmd(env, "stats", *served)
    assert table.returncode == 0
    assert "orders" in table.stdout
    assert "reports: timeouts 50% are over 5%" in table.stdout


def test_stats_says_what_is_wrong_in_one_line(env: dict[str, str]) -> None:
    nothing = fencelock_cmd(env, "stats")
    assert nothing.returncode == 64
    assert "metrics address" in nothing.stderr
    bad = fencelock_cmd(env, "stats", "localhost:9464")
    assert bad.returncode == 64
    assert "not an http://" in bad.stderr
    down = fencelock_cmd(env, "stats", "http://127.0.0.1:9/metrics")
    assert down.returncode == 69
    assert "could not scrape" in down.stderr
    assert "Traceback" not in down.stderr
