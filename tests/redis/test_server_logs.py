"""A failing test's report shows what its throwaway servers logged (fencelock.testing's plugin)."""

from __future__ import annotations

import pytest

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
