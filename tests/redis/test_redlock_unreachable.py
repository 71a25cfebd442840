"""Redlock with nodes down or hung: errors count every node, and a node that does not
answer is never taken for "another owner had it" (the tooz bug).

Release, extend and list need a quorum of answers to tell anything; with fewer they
raise BackendUnavailable naming the nodes. Each test has nodes of its own (it kills
or pauses them).
"""

from __future__ import annotations

import contextlib
import logging

import pytest

import fencelock
from fencelock import clock
from fencelock.testing import RedisServer, ServerPool, free_port
from tests.redis.conftest import redis_cli

TIMEOUT = 0.2
SLACK = 0.8  # scheduling allowance on a busy machine
TTL = 30.0


def redlock_url(ports: list[int], timeout: float = TIMEOUT) -> str:
    return "redlock://" + ",".join(f"127.0.0.1:{p}" for p in ports) + f"?timeout={timeout:g}"


def key(name: str) -> str:
    return f"fencelock:{{{name}}}"


@pytest.fixture
def five(servers: ServerPool) -> list[RedisServer]:
    return [servers.redis(name=f"redlock-u{i}") for i in range(5)]


@pytest.fixture
def three(servers: ServerPool) -> list[RedisServer]:
    return [servers.redis(name=f"redlock-u{i}") for i in range(3)]


def ports_of(nodes: list[RedisServer]) -> list[int]:
    return [node.port for node in nodes]


# -- counting the nodes ----------------------------------------------------------------


def test_every_node_down_is_counted_and_named() -> None:
    ports = [free_port() for _ in range(3)]
    with (
        fencelock.connect(redlock_url(ports)) as client,
        pytest.raises(fencelock.BackendUnavailable) as caught,
    ):
        client.lock("down/all").acquire(timeout=0)
    message = str(caught.value)
    assert "3 of 3 nodes unavailable" in message, message
    assert all(f"cannot reach Redis at 127.0.0.1:{port}" in message for port in ports), message


def test_a_hung_node_among_dead_ones_is_counted_within_about_the_timeout(
    three: list[RedisServer],
) -> None:
    with fencelock.connect(redlock_url(ports_of(three))) as client:
        three[0].kill()
        three[1].kill()
        three[2].pause()
        started = clock.now()
        try:
            with pytest.raises(fencelock.BackendUnavailable) as caught:
                client.lock("down/hung").acquire(timeout=0)
        finally:
            three[2].resume()
    assert clock.now() - started < TIMEOUT + SLACK
    message = str(caught.value)
    assert "3 of 3 nodes unavailable" in message, message
    assert f"127.0.0.1:{three[2].port} did not answer within" in message, message


# -- release ---------------------------------------------------------------------------


def test_a_release_no_quorum_answered_names_the_nodes_and_the_ttl(
    three: list[RedisServer], name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The lease was still safe, so the work was protected: the failed release is
    logged (not raised) with the backend's words."""
    with fencelock.connect(redlock_url(ports_of(three))) as client:
        lease = client.lock(name, ttl=TTL).acquire(timeout=0)
        three[1].kill()
        three[2].kill()
        with caplog.at_level(logging.WARNING, logger="fencelock"):
            lease.release()
    said = [r.getMessage() for r in caplog.records if "could not release" in r.getMessage()]
    assert said, [r.getMessage() for r in caplog.records]
    message = said[0]
    assert "not confirmed: 2 of 3 nodes did not answer" in message, message
    assert f"127.0.0.1:{three[1].port}" in message
    assert f"127.0.0.1:{three[2].port}" in message
    assert "expire by their TTL" in message, message
    assert "another owner" not in message


def test_a_release_a_quorum_confirmed_is_a_release(five: list[RedisServer], name: str) -> None:
    """Our key was gone from one node and two did not answer: not "another owner had it"."""
    with fencelock.connect(redlock_url(ports_of(five))) as client:
        lease = client.lock(name, ttl=TTL).acquire(timeout=0)
        redis_cli(five[2].port, "del", key(name))  # as if it expired there early
        five[3].kill()
        five[4].kill()
        lease.release()  # no LeaseLost
        assert lease.released
        for node in five[:3]:
            assert redis_cli(node.port, "exists", key(name)) == "0"


def test_a_release_of_keys_gone_everywhere_is_still_a_loss(
    five: list[RedisServer], name: str
) -> None:
    with fencelock.connect(redlock_url(ports_of(five))) as client:
        lease = client.lock(name, ttl=TTL).acquire(timeout=0)
        for node in five[:3]:
            redis_cli(node.port, "del", key(name))
        five[4].kill()
        with pytest.raises(fencelock.LeaseLost, match="another owner had it at release"):
            lease.release()


# -- extend ----------------------------------------------------------------------------


def test_renew_is_decided_by_the_engine(
    five: list[RedisServer], name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """True with a quorum in time; False when lost; unknown raises; late is a loss."""
    with fencelock.connect(redlock_url(ports_of(five))) as client:
        backend = client.internals.backend
        lease = client.lock(name, ttl=TTL, renew=False).acquire(timeout=0)
        assert backend.renew(name, lease.owner, TTL) is True
        five[3].kill()
        five[4].kill()
        assert backend.renew(name, lease.owner, TTL) is True  # 3 of 5 is a quorum
        redis_cli(five[2].port, "del", key(name))
        with pytest.raises(fencelock.BackendUnavailable, match="2 of 5 nodes unavailable"):
            backend.renew(name, lease.owner, TTL)  # 2 yes, 1 no, 2 unknown: cannot tell
        # The process was paused past the lease's bound; the keys outlived it on the
        # nodes (their clocks are not ours): extending them now must not revive it.
        real_now = clock.now
        monkeypatch.setattr(clock, "now", lambda: real_now() + TTL)
        redis_cli(five[2].port, "set", key(name), lease.owner, "px", "60000")
        with pytest.raises(fencelock.LeaseLost, match="after the lease's safe time"):
            backend.renew(name, lease.owner, TTL)
        monkeypatch.undo()
        for node in five[:3]:
            redis_cli(node.port, "del", key(name))
        assert backend.renew(name, lease.owner, TTL) is False
        with contextlib.suppress(fencelock.LeaseLost):
            lease.release()


# -- list ------------------------------------------------------------------------------


def test_list_needs_a_quorum_of_answers(three: list[RedisServer], name: str) -> None:
    with fencelock.connect(redlock_url(ports_of(three))) as client:
        lease = client.lock(name, ttl=TTL).acquire(timeout=0)
        three[2].kill()
        assert [info.name for info in client.list(name)] == [name]  # 2 of 3 answered
        three[1].kill()
        with pytest.raises(fencelock.BackendUnavailable) as caught:
            client.list(name)
        with contextlib.suppress(fencelock.FencelockError):
            lease.release()
    message = str(caught.value)
    assert "2 of 3 nodes unavailable, no quorum of 2 possible" in message, message
    assert f"127.0.0.1:{three[1].port}" in message, message


def test_list_with_every_node_down_raises_rather_than_saying_none_are_held() -> None:
    ports = [free_port() for _ in range(3)]
    with (
        fencelock.connect(redlock_url(ports)) as client,
        pytest.raises(fencelock.BackendUnavailable, match="3 of 3 nodes unavailable"),
    ):
        client.list("")
