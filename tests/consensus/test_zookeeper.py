"""zookeeper:// beyond the contract: kazoo's own Lock and fencelock exclude each other
both ways, the token is the holder node's czxid, a session the server ends is a
loss at once, a thousand leases cost one session's traffic, and bad input ends in
one clear fencelock error."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import LockTimeout
from kazoo.protocol.states import WatchedEvent

import fencelock
from fencelock.backends.zookeeper.bridge import LoopHandler
from fencelock.holder import UNKNOWN, holder_of
from fencelock.testing import ServerPool, ZooKeeperServer
from tests.polling import wait_until


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    with ServerPool(tmp_path_factory.mktemp) as pool:
        yield pool.zookeeper(1)[0]


@pytest.fixture
def kazoo(zookeeper: ZooKeeperServer) -> Iterator[KazooClient]:
    client = KazooClient(hosts=zookeeper.address, timeout=10.0)
    client.start(10)
    yield client
    client.stop()
    client.close()


def packets_received(member: ZooKeeperServer) -> int:
    with socket.create_connection(("127.0.0.1", member.port), timeout=5) as sock:
        sock.sendall(b"mntr")
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    for line in reply.decode().splitlines():
        key, _, value = line.partition("\t")
        if key == "zk_packets_received":
            return int(value)
    raise AssertionError(f"mntr has no zk_packets_received: {reply[:200]!r}")


def test_kazoos_lock_and_fencelock_exclude_each_other(
    zookeeper: ZooKeeperServer, kazoo: KazooClient
) -> None:
    theirs = kazoo.Lock("/fencelock/jobs/nightly", "kazoo-worker")
    assert theirs.acquire(timeout=10)
    with fencelock.connect(zookeeper.url) as client:
        lock = client.lock("jobs/nightly", ttl=5)
        assert lock.try_acquire() is None  # kazoo holds it
        info = client.inspect("jobs/nightly")
        assert info is not None
        assert info.held
        assert info.waiters == 0
        assert lock.contenders() == [UNKNOWN]  # kazoo's node describes no process
        theirs.release()
        lease = lock.acquire(timeout=10)
        # now fencelock holds it: kazoo's Lock queues behind it and gets it on release
        with pytest.raises(LockTimeout):
            kazoo.Lock("/fencelock/jobs/nightly", "kazoo-worker").acquire(timeout=1)
        again = kazoo.Lock("/fencelock/jobs/nightly", "kazoo-worker")
        got = threading.Event()

        def take() -> None:
            if again.acquire(timeout=30):
                got.set()

        waiter = threading.Thread(target=take)
        waiter.start()
        wait_until(
            lambda: (queued := client.inspect("jobs/nightly")) is not None and queued.waiters == 1,
            what=lambda: f"kazoo's Lock in line: {client.inspect('jobs/nightly')}",
            interval=0.01,
        )
        assert not got.is_set()  # in line behind fencelock's lease
        assert lock.contenders() == [holder_of(lease.owner), UNKNOWN]
        lease.release()
        waiter.join(30)
        assert got.is_set(), "kazoo's Lock never got the lock fencelock released"
        again.release()
        assert lock.acquire(timeout=10).token > lease.token


def test_the_token_is_the_holder_nodes_czxid(
    zookeeper: ZooKeeperServer, kazoo: KazooClient
) -> None:
    with fencelock.connect(zookeeper.url) as client, client.lock("orders/7", ttl=5) as lease:
        (node,) = kazoo.get_children("/fencelock/orders/7")
        _, stat = kazoo.get(f"/fencelock/orders/7/{node}")
        assert lease.token == stat.czxid
        assert node.startswith(lease.owner + "__lock__")


def test_a_session_the_server_ends_is_a_loss_at_once(zookeeper: ZooKeeperServer) -> None:
    with fencelock.connect(zookeeper.url) as client:
        lease = client.lock("expiring", ttl=20).acquire()
        (session,) = client.internals.backend._inner._sessions.values()  # type: ignore[attr-defined]
        session_id, password = session.client.client_id
        # another connection with the same session id and password closes the session
        thief = KazooClient(hosts=zookeeper.address, client_id=(session_id, password))
        thief.start(10)
        thief.stop()
        thief.close()
        started = time.monotonic()
        assert lease.wait_lost(10), "the lease never heard its session end"
        assert time.monotonic() - started < 10
        assert "ZooKeeper session" in (lease.lost_reason or ""), lease.lost_reason
        with fencelock.connect(zookeeper.url) as other:
            successor = other.lock("expiring", ttl=5).acquire(timeout=10)
            assert successor.token > lease.token
            successor.release()


def test_a_node_deleted_by_someone_else_is_a_loss_at_once(zookeeper: ZooKeeperServer) -> None:
    """Once a lease's first renewal (here its ``extend``) has set the watch on its node,
    the node's deletion by another client (``release --force``) is a loss the moment the
    watch fires, not at the next renewal, 10 s away with this TTL."""
    with fencelock.connect(zookeeper.url) as client, fencelock.connect(zookeeper.url) as other:
        lease = client.lock("evicted", ttl=30).acquire()
        lease.extend(30)
        evicted = other.evict("evicted")
        assert evicted is not None
        assert evicted.token == lease.token
        assert lease.wait_lost(5), "the deletion was not heard before the next renewal"
        assert "was deleted by another client" in (lease.lost_reason or ""), lease.lost_reason
        mine = client.lock("kept", ttl=30).acquire()
        mine.extend(30)
        mine.release()  # its own deletion is no loss
        assert not mine.lost


def test_a_waiter_whose_session_the_server_ends_queues_again_at_once(
    zookeeper: ZooKeeperServer,
) -> None:
    """The end of a blocking waiter's session wakes it, and it queues again in a new
    session. The first request refused with the ended session ends it: kazoo's LOST
    reaches the blocking client's loop only when something runs it, and until then the
    try was handed the ended session again, three times, and the acquire failed."""
    name = f"requeue/{time.monotonic_ns()}"
    with fencelock.connect(zookeeper.url) as holding, fencelock.connect(zookeeper.url) as waiting:
        first, taken, waiter = _one_holds_one_waits(holding, waiting, name, 20, 60)
        kazoo = KazooClient(hosts=zookeeper.address)
        kazoo.start(10)
        try:
            line = f"/fencelock/{name}"

            def waiters() -> list[str]:
                return [n for n in kazoo.get_children(line) if not n.startswith(first.owner)]

            queued = wait_until(waiters, what="the waiter in line", interval=0.01)
            (session,) = waiting.internals.backend._inner._sessions.values()  # type: ignore[attr-defined]
            thief = KazooClient(hosts=zookeeper.address, client_id=session.client.client_id)
            thief.start(10)
            thief.stop()
            thief.close()
            wait_until(
                lambda: waiters() not in ([], queued),
                what="the waiter in line again, in a new session",
                timeout=15,
                interval=0.01,
            )
        finally:
            kazoo.stop()
            kazoo.close()
        first.release()
        waiter.join(60)
        assert taken
        assert taken[0].token > first.token
        taken[0].release()


def test_a_thousand_leases_cost_one_sessions_traffic(zookeeper: ZooKeeperServer) -> None:
    with fencelock.connect(zookeeper.url) as client:
        # A TTL of 6 s: renewed every 2 s, so a renewal may run 4 s late on a busy machine
        leases = [client.lock(f"many/{i}", ttl=6).acquire() for i in range(1000)]
        time.sleep(2.5)  # past every lease's first renewal, which sets a watch on its node
        before = packets_received(zookeeper)
        time.sleep(6)  # a TTL: every lease renewed at least twice
        received = packets_received(zookeeper) - before - 1  # this mntr's own connection
        assert not any(lease.lost for lease in leases)
        # kazoo's pings (one a second) and fencelock's probes (one per TTL/3): not 1,000s
        assert received < 60, f"{received} packets in 6 s for 1,000 leases"
        for lease in leases:
            lease.release()


def test_a_ttl_longer_than_the_servers_maximum_session_is_refused(
    zookeeper: ZooKeeperServer,
) -> None:
    with fencelock.connect(zookeeper.url) as client:
        with pytest.raises(fencelock.ConfigError, match="maxSessionTimeout"):
            client.lock("long", ttl=600).acquire(timeout=5)
        assert client.inspect("long") is None or not client.inspect("long").held  # type: ignore[union-attr]


def test_extending_past_the_session_says_why_it_cannot(zookeeper: ZooKeeperServer) -> None:
    with fencelock.connect(zookeeper.url) as client:
        lease = client.lock("short", ttl=2, renew=False).acquire()
        lease.extend(2)  # within its session: fine
        with pytest.raises(fencelock.ConfigError, match="acquire with the longer TTL"):
            lease.extend(30)
        lease.release()
        assert lease.released
        assert not lease.lost


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("zookeeper://", "names no ZooKeeper server"),
        ("zookeeper://127.0.0.1:2181/a/../b", "not a usable ZooKeeper path"),
        ("zookeeper://127.0.0.1:2181/zookeeper", "not a usable ZooKeeper path"),
        ("zookeeper://127.0.0.1:2181?prefix=x", "prefix"),
        ("zookeeper://user@127.0.0.1:2181", "both a user and a password"),
    ],
)
def test_bad_urls_are_refused_by_name(url: str, message: str) -> None:
    with pytest.raises(fencelock.ConfigError, match=message):
        fencelock.connect(url)


def test_an_unreachable_ensemble_is_one_clear_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed once the block ends: nothing listens
    url = f"zookeeper://127.0.0.1:{port}?connect_timeout=1"
    with fencelock.connect(url) as client:
        started = time.monotonic()
        with pytest.raises(fencelock.BackendUnavailable, match="unreachable"):
            client.lock("x").acquire(timeout=1)
        assert time.monotonic() - started < 10


def test_a_url_with_credentials_gets_its_session(zookeeper: ZooKeeperServer) -> None:
    """kazoo says "connected" before it sends the credentials: the granted timeout used
    to be read then (0 s), and every lock failed with a ConfigError."""
    url = f"zookeeper://alice:s3cret@{zookeeper.address}"
    with fencelock.connect(url) as client:
        lease = client.lock("auth/credentials", ttl=5).acquire(timeout=10)
        assert lease.token > 0
        lease.release()


def _one_holds_one_waits(
    holding: fencelock.Client, waiting: fencelock.Client, name: str, ttl: float, timeout: float
) -> tuple[fencelock.Lease, list[fencelock.Lease], threading.Thread]:
    """``holding`` takes ``name``; a thread waits for it through ``waiting`` (its lease
    lands in the list)."""
    first = holding.lock(name, ttl=ttl).acquire()
    taken: list[fencelock.Lease] = []
    waiter = threading.Thread(
        target=lambda: taken.append(waiting.lock(name, ttl=ttl).acquire(timeout=timeout))
    )
    waiter.start()
    return first, taken, waiter


def _requests_by_kind(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Every ZooKeeper request this process sends from now on, counted by kind."""
    counts: dict[str, int] = {}
    send = KazooClient._call

    def counting(self: KazooClient, request: object, async_object: object) -> object:
        kind = type(request).__name__
        counts[kind] = counts.get(kind, 0) + 1
        return send(self, request, async_object)

    monkeypatch.setattr(KazooClient, "_call", counting)
    return counts


def test_a_waiter_behind_the_holder_takes_over_without_listing_the_line(
    zookeeper: ZooKeeperServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The holder's deletion hands the lease to the one contender behind it: no listing
    on the handoff's path (the waiter knew it was next: it listed the line as it joined)."""
    name = f"handoff/{time.monotonic_ns()}"
    with fencelock.connect(zookeeper.url) as holding, fencelock.connect(zookeeper.url) as waiting:
        first, taken, waiter = _one_holds_one_waits(holding, waiting, name, 10, 30)
        wait_until(
            lambda: (info := holding.inspect(name)) is not None and info.waiters,
            what="the waiter in line",
            interval=0.01,
        )
        counts = _requests_by_kind(monkeypatch)
        first.release()
        waiter.join(30)
        assert taken
        assert taken[0].token > first.token
        assert counts.get("GetChildren", 0) == 0, counts
        info = waiting.inspect(name)
        assert info is not None
        assert info.since is not None
        taken[0].release()


def test_an_at_least_mark_stops_the_handoff_without_a_listing(zookeeper: ZooKeeperServer) -> None:
    """A release that keeps the name (``at_least``) writes its mark in the same step as
    the deletion: the waiter behind sees the mark, not a free lock."""
    name = f"kept/{time.monotonic_ns()}"
    with fencelock.connect(zookeeper.url) as running, fencelock.connect(zookeeper.url) as waiting:
        holding = threading.Event()
        started: list[float] = []

        @fencelock.once(name, at_most=30, at_least=2.0, client=running)
        def job() -> None:
            started.append(time.monotonic())
            holding.set()
            wait_until(  # the waiter queues behind meanwhile
                lambda: (info := running.inspect(name)) is not None and info.waiters == 1,
                what="the waiter in line behind the job",
                interval=0.01,
            )

        taken: list[float] = []

        def wait() -> None:
            holding.wait(30)  # behind the job, however slowly it got the lock
            waiting.lock(name, ttl=10).acquire(timeout=30).release()
            taken.append(time.monotonic())

        waiter = threading.Thread(target=wait)
        waiter.start()
        job()
        waiter.join(30)
        assert taken
        assert taken[0] - started[0] >= 1.9  # not before at_least ran out


def test_watches_are_heard_before_the_answers_the_server_sent_after_them(
    zookeeper: ZooKeeperServer, kazoo: KazooClient
) -> None:
    """kazoo's own handler runs watches on a thread of their own, behind any slow one,
    while fencelock's answers come straight from the connection: an answer could reach a
    waiter before the mark's creation it was sent after (the handoff then missed the
    mark). fencelock's handler calls both as they are read, in the server's order."""
    base = f"/order-{time.monotonic_ns()}"
    kazoo.create(f"{base}/holder", makepath=True)
    client = KazooClient(hosts=zookeeper.address, timeout=10.0, handler=LoopHandler(5.0))
    client.start(10)
    try:
        heard: list[str] = []

        def slow_watch(_event: WatchedEvent) -> None:
            time.sleep(0.3)  # a watch callback that takes its time
            heard.append("the holder's deletion")

        client.exists(f"{base}/holder", watch=slow_watch)
        client.exists(f"{base}/mark", watch=lambda _event: heard.append("the mark's creation"))
        release = kazoo.transaction()
        release.create(f"{base}/mark")
        release.delete(f"{base}/holder")
        release.commit()
        answer = client.exists_async(base)
        answer.rawlink(lambda _result: heard.append("the answer after them"))
        answer.get(10)
        wait_until(lambda: len(heard) == 3, what="both watches and the answer")
        assert heard == ["the mark's creation", "the holder's deletion", "the answer after them"]
    finally:
        client.stop()
        client.close()
