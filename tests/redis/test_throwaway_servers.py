"""fencelock.testing's throwaway servers: start failures, stopping paused ones, logs on failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from fencelock.testing import ServerPool, ServerStartError

pytest_plugins = ["pytester"]

FAILING = """
from fencelock.testing import ServerPool

pytest_plugins = ["fencelock.testing.pytest_plugin"]


def test_passes(tmp_path):
    with ServerPool.under(tmp_path) as pool:
        pool.redis(name="quiet-one")


def test_fails(tmp_path):
    with ServerPool.under(tmp_path) as pool:
        server = pool.redis("--enable-debug-command", "local", name="noisy-one")
        server.cli("debug", "log", "written-" + "by-the-test")  # not in the traceback
        assert False, "on purpose"
"""


def test_a_failing_test_shows_its_servers_log(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_logs=FAILING)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "Captured server log call" in out, out
    assert "--- noisy-one at 127.0.0.1:" in out, out
    assert "written-by-the-test" in out, out
    assert "Ready to accept connections" in out, out
    assert "quiet-one" not in out, out  # a passing test's server is not shown


def test_a_server_that_cannot_start_says_why_with_its_log(tmp_path: Path) -> None:
    with ServerPool.under(tmp_path) as pool, pytest.raises(ServerStartError) as failed:
        pool.redis("--no-such-directive", "1", name="broken")
    assert "broken exited at start" in str(failed.value)
    assert "no-such-directive" in str(failed.value)  # redis-server's own complaint, from its log


def test_stop_ends_a_paused_server_and_start_brings_it_back_on_its_port(tmp_path: Path) -> None:
    with ServerPool.under(tmp_path) as pool:
        server = pool.redis(name="paused")
        first, port = server.pid, server.port
        server.pause()
        server.stop(grace=5)
        assert not server.alive
        assert not server.paused
        server.start()
        assert server.alive
        assert server.pid != first
        assert server.port == port
        assert server.cli("ping") == "PONG"
    assert not server.alive
