"""``redis+sentinel://``: the master Sentinel names, followed through a failover (real
``redis-server --sentinel`` processes): a lease held across it is either kept (the
promoted replica had its key) or reported lost, never silently held twice, and tokens
after it are greater. The contract suite runs on Sentinel too (``redis-sentinel``)."""

from __future__ import annotations

import socket

import pytest

import fencelock
from fencelock.testing.pool import ServerPool
from fencelock.testing.redis import SentinelServer
from tests.contract.conftest import sentinel_url
from tests.polling import wait_until
from tests.redis.conftest import kept_or_lost_never_twice


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("redis+sentinel://127.0.0.1:26379", "takes the sentinels and the service"),
        ("redis+sentinel://127.0.0.1:26379/mymaster/one", "database must be a number"),
        ("redis+sentinel://127.0.0.1:26379/mymaster/0?ssl_ca_certs=x", "ssl_ca_certs"),
    ],
)
def test_bad_sentinel_urls_say_what_is_wrong(url: str, message: str) -> None:
    with pytest.raises(fencelock.ConfigError, match=message):
        fencelock.connect(url)


def test_no_sentinel_answering_is_one_clear_error() -> None:
    with pytest.raises(fencelock.BackendUnavailable, match="Redis master 'mymaster'"):
        fencelock.connect("redis+sentinel://127.0.0.1:9/mymaster/0?connect_timeout=0.5")


def _ask(sentinel: SentinelServer, command: str) -> bytes:
    with socket.create_connection(("127.0.0.1", sentinel.port), timeout=5) as raw:
        raw.sendall(command.encode() + b"\r\n")
        return raw.recv(4096)


def test_a_failover_keeps_the_lease_or_reports_it_lost(servers: ServerPool, name: str) -> None:
    url = sentinel_url(servers, service="failing")
    sentinels = [s for s in servers.servers if isinstance(s, SentinelServer)]
    before = sentinels[0].master_port_now()
    with fencelock.connect(url) as client, fencelock.connect(url) as other:
        lease = client.lock(name, ttl=3).acquire()
        wait_until(  # asked again until the replica is known to them
            lambda: _ask(sentinels[0], "SENTINEL FAILOVER failing").startswith(b"+OK"),
            what="the sentinels to agree to fail over",
            interval=0.5,
        )
        wait_until(
            lambda: sentinels[0].master_port_now() not in (before, None),
            what="a new master",
            interval=0.2,
        )
        kept_or_lost_never_twice(lease, other)
