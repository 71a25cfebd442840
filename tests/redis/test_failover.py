"""The failover hazard of a single Redis primary, reproduced with a real replica.

Redis replicates asynchronously: a lock written on the primary and lost with it
before reaching the replica is simply absent on the promoted replica, so a
second client gets the "same" lock while the first still believes it holds it.
The lock cannot prevent that; the fencing token is what keeps the data safe.
"""

from __future__ import annotations

import asyncio

import pytest

import fencelock
from fencelock.fencing import RedisGuard
from fencelock.testing import RedisServer, ServerPool
from tests.polling import wait_until
from tests.redis.conftest import redis_cli


def start_pair(servers: ServerPool) -> tuple[RedisServer, RedisServer]:
    """A primary and one replica that has finished its initial sync."""
    # Diskless sync starts at once instead of after the default 5 s delay.
    primary = servers.redis("--repl-diskless-sync-delay", "0", name="primary")
    replica = servers.redis("--replicaof", "127.0.0.1", str(primary.port), name="replica")

    def synced() -> bool:
        seen_by_replica = redis_cli(replica.port, "info", "replication")
        seen_by_primary = redis_cli(primary.port, "info", "replication")
        return (
            "master_link_status:up" in seen_by_replica
            and "master_sync_in_progress:0" in seen_by_replica
            and "state=online" in seen_by_primary
        )

    wait_until(synced, timeout=15, what=lambda: f"the replica synced\n{servers.logs()}")
    return primary, replica


def lock_key(name: str) -> str:
    return f"fencelock:{{{name}}}"


def wait_caught_up(primary: RedisServer, replica: RedisServer, name: str) -> None:
    """Until the resumed replica has applied everything the primary did to ``name``."""
    token_key = lock_key(name) + ":token"

    def same() -> bool:
        keys = (lock_key(name), token_key)
        return [redis_cli(replica.port, "get", k) for k in keys] == [
            redis_cli(primary.port, "get", k) for k in keys
        ]

    wait_until(same, timeout=10, what=lambda: f"the replica caught up\n{replica.log()}")


def test_failover_gives_two_holders_and_fencing_rejects_the_stale_one(
    servers: ServerPool,
) -> None:
    name = "orders/1"
    primary, replica = start_pair(servers)
    promoted_url = replica.url

    # Partition the replica. SIGSTOP alone is not enough: the kernel keeps
    # receiving the replication stream into the stopped process's socket buffer
    # and it applies A's write the moment it resumes. So the primary also drops
    # its replica link; the stopped replica cannot reconnect to get it back.
    replica.pause()
    assert redis_cli(primary.port, "client", "kill", "type", "replica") == "1", servers.logs()

    with fencelock.connect(primary.url) as client_a:
        lease_a = client_a.lock(name, ttl=30, renew=False).acquire(timeout=0)

        primary.kill()  # the primary dies with A's lock, which never left it
        replica.resume()
        assert redis_cli(replica.port, "exists", lock_key(name)) == "0", servers.logs()
        assert redis_cli(replica.port, "replicaof", "no", "one") == "OK", servers.logs()
        wait_until(
            lambda: "role:master" in redis_cli(replica.port, "info", "replication"),
            timeout=5,
            what=lambda: f"the replica promoted\n{servers.logs()}",
        )

        with fencelock.connect(promoted_url) as client_b:
            lease_b = client_b.lock(name, ttl=30, renew=False).acquire(timeout=0)
            # Both believe they hold orders/1 right now: the lock alone failed.
            assert not lease_a.lost
            assert lease_a.remaining() > 20
            assert not lease_b.lost

            # The promoted replica never saw A's token counter either. Tokens are
            # seeded from the server's clock (acquire.lua: max(counter + 1, TIME in
            # microseconds)), and B's acquisition happened later in real time than
            # A's, so B's token is still larger, as long as the new primary's
            # clock is not behind the old one's (here: one host, one clock).
            assert lease_b.token > lease_a.token

            guard = RedisGuard(promoted_url)
            try:
                guard.write(name, lease_b.token, f"{{{name}}}:data", "written by B")
                with pytest.raises(fencelock.StaleToken) as stale:
                    guard.write(name, lease_a.token, f"{{{name}}}:data", "written by A")
                assert (stale.value.token, stale.value.last) == (lease_a.token, lease_b.token)
                assert guard.rejections == 1
                assert guard.last(name) == lease_b.token
            finally:
                guard.close()
            assert redis_cli(replica.port, "get", f"{{{name}}}:data") == "written by B"


def test_wait_replicas_refuses_a_lock_the_replica_did_not_acknowledge(
    servers: ServerPool, name: str
) -> None:
    primary, replica = start_pair(servers)
    careful_url = f"{primary.url}?wait_replicas=1&wait_timeout=0.2"
    where = f"127.0.0.1:{primary.port}"

    replica.pause()
    try:
        with fencelock.connect(careful_url) as client:
            with pytest.raises(fencelock.BackendUnavailable) as caught:
                client.lock(name, ttl=30).acquire(timeout=0)
            message = str(caught.value)
            assert where in message, message
            assert "only 0 of 1 replicas acknowledged" in message, message
            info = client.inspect(name)
            assert info is not None, info
            assert not info.held, info  # taken back, not left held
    finally:
        replica.resume()

    wait_caught_up(primary, replica, name)
    with fencelock.connect(careful_url) as client, client.lock(name, ttl=30) as lease:
        # Acknowledged means the replica has it: a failover now keeps the lock.
        assert redis_cli(replica.port, "get", lock_key(name)) == lease.owner, servers.logs()


def test_wait_replicas_asyncio(servers: ServerPool, name: str) -> None:
    primary, replica = start_pair(servers)
    careful_url = f"{primary.url}?wait_replicas=1&wait_timeout=0.2"

    async def acquire_paused_then_running() -> tuple[BaseException | None, bool]:
        async with fencelock.aconnect(careful_url) as client:
            replica.pause()
            try:
                await client.lock(name, ttl=30).acquire(timeout=0)
                error = None
            except fencelock.FencelockError as exc:
                error = exc
            finally:
                replica.resume()
            info = await client.inspect(name)
            assert info is not None, info
            assert not info.held, info
            wait_caught_up(primary, replica, name)
            async with client.lock(name, ttl=30) as lease:
                on_replica = redis_cli(replica.port, "get", lock_key(name))
                return error, on_replica == lease.owner

    error, replicated = asyncio.run(acquire_paused_then_running())
    assert isinstance(error, fencelock.BackendUnavailable), repr(error)
    assert "only 0 of 1 replicas acknowledged" in str(error), str(error)
    assert replicated, f"the acknowledged lock is not on the replica\n{servers.logs()}"
