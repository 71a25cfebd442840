"""The Redis model (:mod:`fencelock.sim.redis_model`) held to a real redis-server: the same
seeded sequence of steps through two real ``AsyncRedisBackend``s, one on the server, one
on the model (its requests straight to it: ``direct_redis_backend``), comes to the same
outcome at every step. The steps: tries of an acquisition (granted, or queued as a
waiter, which stays queued for later steps), a waiter giving up, a waiter's wait (woken
by a release, or not), renewals one by one and in a batch, releases, ``inspect``,
``waiters`` and ``list``, time passing (leases and waiters expiring, renewals after
expiry), the server killed and started again with its data (an AOF written at every
write) or without it, and the server paused while a client's try is out: the client
gives up on it, the server runs it when it resumes, and the client's undo gives back
what it took.

Time: the model's clock is the real one. No step is sent within ``MARGIN`` of any
deadline the model's keyspace holds (a key's expiry, a waiter's liveness), and each
step comes ``SPACING`` after the last, past the starvation bound of any waiter queued
before it, so a loaded machine's delays cannot decide an outcome either way."""

from __future__ import annotations

import asyncio
import random
import secrets
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace

import pytest

from fencelock.backends import open_async_backend
from fencelock.backends.base import AsyncBackend
from fencelock.backends.redis.async_backend import AsyncRedisBackend
from fencelock.backends.redis.attempt import AsyncRedisAttempt
from fencelock.engine.outcomes import Acquired, Busy
from fencelock.errors import BackendUnavailable, FencelockError
from fencelock.primitives.lock import new_owner
from fencelock.sim.redis import direct_redis_backend
from fencelock.sim.redis_model import RedisModel
from fencelock.testing import RedisServer, ServerPool
from tests.contract.conftest import BACKENDS

TTLS = (0.6, 2.5)  # a lease a pass ends, and one that outlives a few steps
PASS = 0.7  # seconds a pass lets go by
MARGIN = 0.15  # no step this close to a deadline of the keyspace
SPACING = 0.03  # between steps: past barging.STARVATION_BOUND (20 ms)
WOKEN_WITHIN = 0.2  # a wait that returns sooner was woken (it waits up to 2x this)
IMPATIENT = 0.3  # the timeout of the client whose try a paused server runs late
UNDO_SETTLED = 0.6  # by then its undo ran: its ping answered at the resume, then UNDO_SETTLE
STEPS = 24  # the seeded steps after the scripted ones
SEED = 4
OPS = (
    *("acquire",) * 5,
    *("release",) * 3,
    *("renew",) * 2,
    "renew many",
    "leave",
    *("wait",) * 2,
    "inspect",
    "waiters",
    "list",
    "pass",
)
# Every case once, in a row, before the seeded steps: (op, who, ttl)
SCRIPTED = (
    ("acquire", 0, 2.5),
    ("inspect", 0, 0.0),
    ("list", 0, 0.0),
    ("renew", 0, 2.5),
    ("acquire", 1, 2.5),  # queued: its attempt stays open, with its TTL
    ("waiters", 0, 0.0),
    ("wait", 1, 0.0),  # nothing to wake it
    ("release", 0, 0.0),  # wakes the waiter
    ("wait", 1, 0.0),
    ("acquire", 1, 2.5),
    ("acquire", 2, 0.6),
    ("leave", 2, 0.0),
    ("release", 1, 0.0),
    ("release", 1, 0.0),  # no longer its
    ("acquire", 2, 0.6),
    ("pass", 0, 0.0),  # the lease of 0.6 s ends
    ("renew", 2, 2.5),
    ("inspect", 0, 0.0),
    ("acquire", 2, 2.5),
    ("acquire", 0, 2.5),  # queued across the kill, its place kept
    ("kill", 0, 0.0),
    ("inspect", 0, 0.0),
    ("waiters", 0, 0.0),
    ("kill-empty", 0, 0.0),
    ("inspect", 0, 0.0),
    ("acquire", 0, 2.5),  # its token still above the last: the server's clock
    ("release", 0, 0.0),
    ("late try", 1, 2.5),  # a try the paused server runs after its client gave up
)
# What the sequence must meet (asserted): each kind of outcome, on both sides alike.
MET = {
    "acquire: acquired",
    "acquire: busy",
    "wait: woken",
    "wait: not woken",
    "renew: True",
    "renew: False",
    "release: True",
    "release: False",
    "leave: left",
    "kill: done",
    "kill-empty: done",
    "late try: unanswered, then free, its try ran",
    "inspect: held",
    "inspect: free",
    "waiters: some",
    "list: some",
}


def _kind(op: str, said: str) -> str:
    """What kind of outcome ``said`` is, for the sequence's coverage."""
    if op == "inspect":
        return f"inspect: {'free' if 'nobody' in said or 'never' in said else 'held'}"
    if op in ("waiters", "list"):
        return f"{op}: {'none' if said == '[]' else 'some'}"
    return f"{op}: {said}"


def _redis_only() -> None:
    if "redis" not in BACKENDS:
        pytest.skip("the Redis model is held to redis-server: redis not among the backends")


@pytest.fixture
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server of this test's own (it is killed), writing an AOF at every write."""
    with ServerPool(tmp_path_factory.mktemp) as pool:
        yield pool.redis("--appendonly", "yes", "--appendfsync", "always", name="model-check")


@dataclass(frozen=True)
class Step:
    op: str
    who: int  # which of three owners
    ttl: float
    aimed: bool  # a release or a renewal by the holder, a wait or a leave by a waiter


def plan(seed: int) -> list[Step]:
    """:data:`SCRIPTED`, then :data:`STEPS` drawn from ``seed``."""
    rng = random.Random(seed)
    steps = [Step(op, who, ttl, False) for op, who, ttl in SCRIPTED]
    return steps + [
        Step(rng.choice(OPS), rng.randrange(3), rng.choice(TTLS), rng.random() < 0.7)
        for _ in range(STEPS)
    ]


def aimed(step: Step, model: RedisModel, name: str, owners: list[str], waiting: set[int]) -> Step:
    """``step`` by the owner it is aimed at, as the model holds the lock now."""
    if not step.aimed:
        return step
    if step.op in ("release", "renew") and (holder := model.holder(name, model.clock())):
        return replace(step, who=owners.index(holder))
    if step.op in ("wait", "leave") and waiting:
        return replace(step, who=sorted(waiting)[step.who % len(waiting)])
    return step


class Side:
    """One backend, the server's or the model's; its owners' open attempts and tokens."""

    def __init__(self, backend: AsyncRedisBackend, owners: list[str], name: str) -> None:
        self.backend, self.owners, self.name = backend, owners, name
        self.prefix = name.rsplit("/", 1)[0] + "/"
        self.attempts: dict[int, AsyncRedisAttempt] = {}
        self.tokens: dict[int, int] = {}
        self.remaining: float | None = None

    def who(self, owner: str | None) -> str:
        return "nobody" if owner is None else str(self.owners.index(owner))

    async def do(self, step: Step) -> tuple[str, float | None]:
        """What came of ``step``, and the lease's remaining time if it said one."""
        self.remaining = None
        try:
            return await self._do(step), self.remaining
        except FencelockError as exc:
            return f"raised {type(exc).__name__}", None

    async def _do(self, step: Step) -> str:
        name, owner, backend = self.name, self.owners[step.who], self.backend
        if step.op == "acquire":
            return await self._acquire(step)
        if step.op == "leave":
            attempt = self.attempts.pop(step.who, None)
            if attempt is None:
                return "not waiting"
            await attempt.close()
            return "left"
        if step.op == "wait":
            attempt = self.attempts.get(step.who)
            if attempt is None:
                return "not waiting"
            began = time.monotonic()
            await attempt.wait(2 * WOKEN_WITHIN)
            return "woken" if time.monotonic() - began < WOKEN_WITHIN else "not woken"
        if step.op == "renew":
            return str(await backend.renew(name, owner, step.ttl))
        if step.op == "renew many":
            renewed = await backend.renew_many([(name, o, step.ttl) for o in self.owners])
            return str(renewed)
        if step.op == "release":
            return str(await backend.release(name, owner))
        if step.op == "inspect":
            info = await backend.inspect(name)
            if info is None:
                return "never held"
            mine = info.owner is not None and info.token == self.tokens.get(
                self.owners.index(info.owner)
            )
            self.remaining = info.remaining
            return f"held by {self.who(info.owner)} (its token {mine}), {info.waiters} waiting"
        if step.op == "waiters":
            return str([self.who(waiter) for waiter in await backend.waiters(name)])
        assert step.op == "list"
        return str([(info.name, self.who(info.owner)) for info in await backend.list(self.prefix)])

    async def _acquire(self, step: Step) -> str:
        attempt = self.attempts.get(step.who)
        if attempt is None:
            attempt = self.backend.attempt(self.name, self.owners[step.who], step.ttl)
        result = await attempt.try_acquire()
        if isinstance(result, Acquired):
            self.attempts.pop(step.who, None)
            await attempt.close()
            assert result.token > max(self.tokens.values(), default=0)
            self.tokens[step.who] = result.token
            return "acquired"
        assert isinstance(result, Busy)
        self.attempts[step.who] = attempt
        return "busy"

    async def reconnect(self) -> None:
        """After a kill: until the server answers (a pooled connection the kill broke
        fails once), and the waiters' listener has subscribed again."""
        for _ in range(3):
            try:
                await self.backend.open()
                break
            except FencelockError:
                continue

    async def close(self) -> None:
        for attempt in self.attempts.values():
            await attempt.close()
        for owner in self.owners:
            await self.backend.release(self.name, owner)
        await self.backend.close()


async def _steer_clear(model: RedisModel) -> None:
    """Wait while a deadline the model keeps (a key's expiry, a waiter's liveness) is
    within MARGIN of now."""
    while True:
        now = model.now_ms()
        deadlines = [entry.expires for entry in model.keys.values() if entry.expires]
        for key, entry in model.keys.items():
            if key.endswith(":alive") and isinstance(entry.value, dict):
                deadlines += [int(score) for score in entry.value.values()]
        near = [at for at in deadlines if abs(at - now) < MARGIN * 1000]
        if not near:
            return
        await asyncio.sleep((max(near) - now) / 1000 + MARGIN + 0.01)


async def _late_try(
    server: RedisServer, model: RedisModel, sides: tuple[Side, Side], step: Step
) -> tuple[str, str]:
    """On each side at once, a client with a short timeout, connected; the server paused,
    the client's try unanswered (its connection closed at its timeout, the request left
    in the server), the server resumed: it runs the try, and the client's undo, sent
    once the server answers its ping, gives back what the try took. What each says."""
    clients = (
        open_async_backend(f"{server.url}?timeout={IMPATIENT}"),
        direct_redis_backend(model, client=1, timeout=IMPATIENT),
    )
    before = [await side.backend.inspect(side.name) for side in sides]
    for client in clients:
        await client.open()  # a connection of its own, connected before the pause

    async def tried(client: AsyncBackend) -> str:
        attempt = client.attempt(sides[0].name, sides[0].owners[step.who], step.ttl)
        try:
            return f"answered {await attempt.try_acquire()}"
        except BackendUnavailable:
            return "unanswered"
        finally:
            await attempt.close()  # the undo, once the server answers again

    server.pause()
    model.pause()
    try:
        said = await asyncio.gather(*(tried(client) for client in clients))
    finally:
        server.resume()
        model.resume()
    await asyncio.sleep(UNDO_SETTLED)
    outcomes = []
    for side, was, client_said in zip(sides, before, said, strict=True):
        now = await side.backend.inspect(side.name)
        ran = now is not None and (was is None or now.token > was.token)
        held = "free" if now is None or now.owner is None else "held"
        outcomes.append(f"{client_said}, then {held}, its try {'ran' if ran else 'never ran'}")
    for client in clients:
        await client.close()
    return outcomes[0], outcomes[1]


async def _kill(server: RedisServer, model: RedisModel, keep: bool) -> None:
    """Both servers killed and started again, with their data or without."""
    await asyncio.to_thread(server.kill)
    if not keep:
        shutil.rmtree(server.workdir / "appendonlydir", ignore_errors=True)
    await asyncio.to_thread(server.start)
    model.restart(keep, model.clock())


def test_the_redis_model_matches_redis_server(server: RedisServer) -> None:
    _redis_only()

    async def main() -> tuple[list[str], set[str], RedisModel]:
        model, owners = RedisModel(time.monotonic), [new_owner() for _ in range(3)]
        name = f"model-check/{secrets.token_hex(4)}"
        real = open_async_backend(f"{server.url}?timeout=2")
        assert isinstance(real, AsyncRedisBackend)
        theirs, ours = Side(real, owners, name), Side(direct_redis_backend(model), owners, name)
        seen: list[str] = []
        met: set[str] = set()
        await theirs.backend.open()
        try:
            for step in plan(SEED):
                await asyncio.sleep(SPACING)
                await _steer_clear(model)
                step = aimed(step, model, name, owners, set(ours.attempts))  # noqa: PLW2901
                if step.op == "pass":
                    await asyncio.sleep(PASS)
                    continue
                if step.op == "late try":
                    server_said, model_said = await _late_try(server, model, (theirs, ours), step)
                    met.add(f"{step.op}: {server_said}")
                    seen.append(f"{step}: server {server_said}, model {model_said}")
                    assert server_said == model_said, "\n".join(seen)
                    continue
                if step.op.startswith("kill"):
                    await _kill(server, model, keep=step.op == "kill")
                    await asyncio.gather(theirs.reconnect(), ours.reconnect())
                    await asyncio.sleep(0.3)  # the listeners subscribe again
                    met.add(f"{step.op}: done")
                    seen.append(f"{step.op}")
                    continue
                (server_said, left), (model_said, ours_left) = (
                    await theirs.do(step),
                    await ours.do(step),
                )
                met.add(_kind(step.op, server_said))
                seen.append(f"{step}: server {server_said}, model {model_said}")
                assert server_said == model_said, "\n".join(seen)
                if left is not None or ours_left is not None:  # as far apart as the steps
                    assert left is not None, "\n".join(seen)
                    assert ours_left is not None, "\n".join(seen)
                    assert abs(left - ours_left) < MARGIN, f"{left} {ours_left}"
        finally:
            await theirs.close()
            await ours.close()
        return seen, met, model

    seen, met, model = asyncio.run(main())
    assert model.unmodeled == []
    assert met >= MET, f"never met: {sorted(MET - met)}\n" + "\n".join(seen)
