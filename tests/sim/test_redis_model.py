"""The Redis server model (:mod:`fencelock.sim.redis_model`): the backend's own Lua
scripts run in Lua 5.1 over its keyspace, with Redis's conversions, expiry by the
server's clock, scripts forgotten at a restart, requests that wait out a pause and run
in order after it (a closed connection's too), pub/sub; and the real Redis backend on
it, through a paused server, in virtual time. The model is held to a real redis-server
in tests/contract/test_redis_model_matches.py."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import random
from collections.abc import Iterator

import pytest

from fencelock.backends.redis.scripts import ACQUIRE, FREE, RENEW, LockKeys
from fencelock.client import AsyncClient
from fencelock.errors import FencelockError
from fencelock.lease import AsyncLease
from fencelock.sim.bugs import REDIS_REUSED_OWNER, reintroduced
from fencelock.sim.loop import ClientClock, client_clock
from fencelock.sim.network import NetworkConditions
from fencelock.sim.redis_model import (
    CONNECT,
    EPOCH_US,
    CommandError,
    Conn,
    RedisModel,
    Reply,
    Status,
)
from fencelock.sim.world import Plan, Violation, World, _close, _seams


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Client:
    """A connection straight to the model, recording what it hears."""

    def __init__(self, model: RedisModel, number: int = 0) -> None:
        self.heard: list[Reply] = []
        self.resets = 0
        self.conn = Conn(number, self._send, self._reset)
        self.model = model
        model.receive(self.conn, CONNECT)

    def _send(self, reply: Reply) -> bool:
        self.heard.append(reply)
        return True

    def _reset(self) -> None:
        self.resets += 1

    def __call__(self, *words: object) -> Reply:
        before = len(self.heard)
        self.model.receive(self.conn, [str(word) for word in words])
        return self.heard[-1] if len(self.heard) > before else "(waits)"


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def model(clock: Clock) -> RedisModel:
    return RedisModel(clock)


def test_commands_and_expiry_by_the_servers_clock(model: RedisModel, clock: Clock) -> None:
    r = Client(model)
    assert r("SET", "k", "v", "PX", 1000) == Status("OK")
    assert r("PTTL", "k") == 1000
    assert r("SET", "k", "w", "NX", "PX", 5) is None
    assert r("GET", "k") == "v"
    clock.now += 1.0  # the key lives through the millisecond its expiry names
    assert r("PTTL", "k") == 0
    assert r("EXISTS", "k", "k") == 2
    clock.now += 0.001
    assert r("GET", "k") is None
    assert r("PTTL", "k") == -2
    assert "k" not in model.keys
    assert r("ZADD", "z", "NX", 5, "b", 5, "a", 1, "c") == 3
    assert r("ZADD", "z", "NX", 9, "a") == 0
    assert r("ZSCORE", "z", "a") == "5"
    assert r("ZRANGE", "z", 0, -1, "WITHSCORES") == ["c", "1", "a", "5", "b", "5"]
    assert r("ZRANGE", "z", 0, 0) == ["c"]
    assert r("ZCARD", "z") == 3
    assert r("PEXPIRE", "z", 10) == 1
    assert r("PEXPIRE", "nothing", 10) == 0
    assert r("ZREM", "z", "a", "b", "c", "d") == 3
    assert r("EXISTS", "z") == 0
    seconds, micros = r("TIME")
    assert int(seconds) * 1_000_000 + int(micros) == model.now_us()
    r("SET", "z2", "v")
    assert isinstance(r("ZADD", "z2", 1, "m"), CommandError)  # WRONGTYPE
    assert model.unmodeled == []


def test_the_servers_clock_drifts_and_reads_unix_time() -> None:
    clock = Clock()
    model = RedisModel(clock, rate=1.005)
    assert model.now_us() == EPOCH_US
    clock.now += 10.0
    assert abs(model.now_us() - (EPOCH_US + 10_050_000)) <= 1
    assert model.true_time(model.now_ms()) == pytest.approx(clock.now, abs=1e-3)


def test_scan_matches_redis_globs(model: RedisModel) -> None:
    r = Client(model)
    for key in ("fencelock:{a/1}", "fencelock:{a/1}:token", "fencelock:{b}", "fencelock:{a*x}"):
        r("SET", key, "1")
    assert r("SCAN", 0, "MATCH", "fencelock:{a*}", "COUNT", 500) == [
        "0",
        ["fencelock:{a/1}", "fencelock:{a*x}"],
    ]
    assert r("SCAN", 0, "MATCH", "fencelock:{a\\*x}")[1] == ["fencelock:{a*x}"]
    assert r("SCAN", 0, "MATCH", "fencelock:{[ab]*}:token")[1] == ["fencelock:{a/1}:token"]


def test_the_backends_scripts_run_as_on_redis(model: RedisModel, clock: Clock) -> None:
    r = Client(model)
    keys = LockKeys.of("orders/1")
    unknown = r("EVALSHA", ACQUIRE.sha, 0)
    assert isinstance(unknown, CommandError)
    assert unknown.text.startswith("NOSCRIPT")
    for script in (ACQUIRE, FREE, RENEW):
        assert r("SCRIPT", "LOAD", script.source) == script.sha
    acquire = [ACQUIRE.sha, 4, *keys.queued, 1000, "ch-a", 20000, 3000]
    granted = r("EVALSHA", *acquire, "owner-a")
    assert granted == [1, str(model.now_us())]  # the token: the server's clock in µs
    assert r("EVALSHA", *acquire, "owner-b") == [0, 1000]  # queued, the holder's PTTL
    assert r("ZRANGE", keys.queue, 0, -1) == ["owner-b@ch-a"]
    assert r("EVALSHA", RENEW.sha, 1, keys.lock, "owner-a", 5000) == 1
    assert r("EVALSHA", RENEW.sha, 1, keys.lock, "owner-b", 5000) == 0
    assert r("EVALSHA", FREE.sha, 3, *keys.waking, "release", "owner-b") == 0
    # the release wakes the oldest live waiter: nobody subscribes, so it is dropped
    assert r("EVALSHA", FREE.sha, 3, *keys.waking, "release", "owner-a") == 1
    assert r("ZCARD", keys.queue) == 0
    assert r("GET", keys.lock) is None
    clock.now += 0.000002
    again = r("EVALSHA", *acquire, "owner-c")
    assert again[0] == 1
    assert int(again[1]) > int(granted[1])
    assert model.unmodeled == []


def test_acquire_takes_its_token_on_a_redis_without_set_get(
    model: RedisModel, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis before 6.2 refuses ``SET ... GET``: acquire.lua reads and writes the counter
    in two commands then, to the same tokens."""
    setting = model._set

    def refuse_get(args: list[str]) -> Reply:
        if "GET" in (a.upper() for a in args[2:]):
            raise CommandError("ERR syntax error")
        return setting(args)

    monkeypatch.setitem(model._commands, "SET", refuse_get)
    r = Client(model)
    keys = LockKeys.of("orders/1")
    assert r("SCRIPT", "LOAD", ACQUIRE.source) == ACQUIRE.sha
    acquire = [ACQUIRE.sha, 4, *keys.queued, 1000, "ch-a", 20000, 3000]
    assert r("EVALSHA", *acquire, "owner-a") == [1, str(model.now_us())]
    assert r("DEL", keys.lock) == 1
    r("SET", keys.token, 4 * 10**15)  # a counter ahead of the clock
    assert r("EVALSHA", *acquire, "owner-b") == [1, str(4 * 10**15 + 1)]
    assert r("GET", keys.token) == str(4 * 10**15 + 1)
    assert model.unmodeled == []


def test_a_script_meets_redis_conversions_and_errors(model: RedisModel) -> None:
    r = Client(model)
    body = "return {1, 2.9, 'x', false, redis.call('SET', KEYS[1], ARGV[1]), 7, nil, 8}"
    assert r("EVAL", body, 1, "k", "v") == [1, 2, "x", None, "OK", 7]  # up to the first nil
    assert r("EVAL", "return redis.call('SET', KEYS[1], 'v')", 1, "k") == Status("OK")
    assert r("EVAL", "return redis.call('GET', 'nothing')", 0) is None
    assert r("EVAL", "return true", 0) == 1
    assert r("EVAL", "return redis.call('ZADD', 'z', 1700000000123456, 'm')", 0) == 1
    assert r("ZSCORE", "z", "m") == "1700000000123456"
    status = r("EVAL", "return redis.pcall('ZADD', KEYS[1], 1, 'm')['err']", 1, "k")
    assert status.startswith("WRONGTYPE")
    failed = r("EVAL", "return redis.call('ZADD', KEYS[1], 1, 'm')", 1, "k")
    assert isinstance(failed, CommandError)
    assert failed.text.startswith("WRONGTYPE")
    assert isinstance(r("EVAL", "return redis.error_reply('no')", 0), CommandError)
    assert model.unmodeled == []
    beyond = r("EVAL", "return redis.call('HSET', 'h', 'f', 'v')", 0)
    assert isinstance(beyond, CommandError)
    assert "not in the Redis model" in beyond.text
    assert isinstance(r("HGET", "h", "f"), CommandError)
    assert model.unmodeled == ["the command HSET in a script", "the command HGET"]


def test_a_restart_resets_connections_and_forgets_scripts(model: RedisModel) -> None:
    r = Client(model)
    r("SCRIPT", "LOAD", RENEW.source)
    r("SET", "k", "v")
    model.restart(keep_data=True, true_now=model.clock())
    assert r.resets == 1
    assert r("GET", "k") == "(waits)"  # its connection is gone
    again = Client(model)
    assert again("GET", "k") == "v"
    assert isinstance(again("EVALSHA", RENEW.sha, 1, "k", "v", 10), CommandError)
    model.restart(keep_data=False, true_now=model.clock())
    assert Client(model)("GET", "k") is None


def test_a_paused_server_runs_what_waited_in_order_closed_connections_too(
    model: RedisModel, clock: Clock
) -> None:
    """As a real one: a request a client gave up on (and closed its connection after)
    still runs when the server resumes, then the requests that came after it."""
    late, other = Client(model, 0), Client(model, 1)
    model.pause(until=clock.now + 2)
    assert late("SET", "k", "late") == "(waits)"
    model.close(late.conn)  # timed out: the client hung up
    assert other("SET", "k", "later") == "(waits)"
    clock.now += 2
    model.resume(ended=clock.now - 1)  # a pause made longer goes on
    assert model.paused
    model.resume(ended=clock.now)
    assert model.keys["k"].value == "later"
    assert late.heard[-1] == Status("OK")


def test_publish_counts_the_live_subscribers(model: RedisModel) -> None:
    r, listener, gone = Client(model), Client(model, 1), Client(model, 2)
    listener("SUBSCRIBE", "ch")
    gone("SUBSCRIBE", "ch")
    model.close(gone.conn)
    assert r("PUBLISH", "ch", "hello") == 1
    assert listener.heard[-1] == ["message", "ch", "hello"]
    assert r("PUBLISH", "other", "x") == 0


def test_sha_of_a_loaded_script_is_its_sha1(model: RedisModel) -> None:
    assert (
        Client(model)("SCRIPT", "LOAD", "return 1")
        == hashlib.sha1(b"return 1", usedforsecurity=False).hexdigest()
    )


# --- the real backend through a paused server, in virtual time -------------------------

TTL = 1.0
CALM = NetworkConditions(slow=0.0, drop=0.0, duplicate=0.0)


@contextlib.contextmanager
def _world(bugs: tuple[str, ...]) -> Iterator[World]:
    world = World(Plan(seed=1, family="redis", conditions=CALM, faults=False, ttl=TTL))
    world.loop.after_step = world.check
    with _seams(world), reintroduced(*bugs):
        try:
            yield world
        finally:
            world.ended = True
            world.loop.after_step = lambda: None
            _close(world.loop)


def _client(world: World) -> tuple[AsyncClient, contextvars.Context]:
    """A client as the world starts one (its own clock, seen by the invariants)."""
    number = len(world.clients)
    own = ClientClock(world.clock.now)
    context = contextvars.copy_context()
    context.run(client_clock.set, own)
    world.clocks.append(own)
    world.clients.append(context.run(AsyncClient, world._backend(number)))
    return world.clients[-1], context


async def _paused_server_scenario(world: World) -> list[AsyncLease]:
    """A holds; B waits, queued; the server is paused twice the TTL (B's tries in the
    pause go unanswered, A's lease runs out); then C comes; B and C each hold what
    they get for twice the TTL (renewed), then let go."""
    loop = world.loop
    (a, in_a), (b, in_b), (c, in_c) = (_client(world) for _ in range(3))
    taken: list[AsyncLease] = []

    async def take(client: AsyncClient, who: str, timeout: float) -> None:
        try:
            lease = await client.lock("orders/1", ttl=TTL).acquire(timeout)
        except FencelockError as exc:
            world.say(f"{who}: {type(exc).__name__}")
            return
        world.say(f"{who}: acquired token {lease.token}")
        taken.append(lease)
        await asyncio.sleep(2 * TTL)
        with contextlib.suppress(FencelockError):
            await lease.release()

    holder = await in_a.run(loop.create_task, a.lock("orders/1", ttl=TTL).acquire(1))
    waiting = in_b.run(loop.create_task, take(b, "B", 20))
    await asyncio.sleep(0.3)
    world._pause_server(2 * TTL, random.Random(0))
    await asyncio.sleep(2 * TTL + 0.05)
    third = in_c.run(loop.create_task, take(c, "C", 20))
    await asyncio.gather(waiting, third)
    with contextlib.suppress(FencelockError):
        await holder.release()
    for client, context in ((a, in_a), (b, in_b), (c, in_c)):
        await context.run(loop.create_task, client.aclose())
    return taken


@pytest.mark.parametrize("bugs", [(), (REDIS_REUSED_OWNER,)])
def test_a_paused_server_never_leaves_two_trusted_holders(bugs: tuple[str, ...]) -> None:
    """tests/redis/test_paused_server_undo.py's run, in the simulator: the fixed backend
    passes it; with the owner reused across tries, the unanswered try's late undo
    deletes the later grant, which its holder goes on trusting."""
    with _world(bugs) as world:
        try:
            taken = world.loop.run_until_complete(_paused_server_scenario(world))
        except Violation:
            taken = []
    trace = "\n".join(world.trace)
    if bugs:
        assert world.violation is not None, trace
        assert "no longer grants" in world.violation, trace
    else:
        assert world.violation is None, trace
        assert taken, trace
        assert isinstance(world.store, RedisModel)
        assert world.store.unmodeled == []
