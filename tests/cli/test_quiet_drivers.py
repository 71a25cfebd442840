"""The command speaks with one voice: a driver's own log lines (kazoo's connection
states) stay out of its output unless ``--verbose`` asks for them."""

from __future__ import annotations

from fencelock.testing import free_port

from .conftest import fencelock_cmd


def test_an_unreachable_zookeeper_is_one_line_and_verbose_shows_kazoo(
    env: dict[str, str],
) -> None:
    url = f"zookeeper://127.0.0.1:{free_port()}/quiet?connect_timeout=1"
    quiet = fencelock_cmd(env, "status", "--url", url, "jobs/q")
    assert quiet.returncode == 69, quiet.stderr
    assert quiet.stderr.splitlines() == [
        f"fencelock: ZooKeeper at {url} unreachable: no server answered in time"
    ]
    ran = fencelock_cmd(env, "run", "--url", url, "jobs/q", "--", "true")
    assert ran.returncode == 69, ran.stderr
    assert len(ran.stderr.splitlines()) == 1, ran.stderr
    verbose = fencelock_cmd(env, "--verbose", "status", "--url", url, "jobs/q")
    assert verbose.returncode == 69
    assert "kazoo.client: Connecting to 127.0.0.1" in verbose.stderr
