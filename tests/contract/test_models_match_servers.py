"""The simulator's models held to the real servers of their family: the same generated
sequences of acquire, renew, release, the passing of time and the end of a session, run
against a model (:mod:`fencelock.sim.model`) and through a real backend, must come to
the same outcomes, step by step. A model that drifts from Redis, SQLite, PostgreSQL,
ZooKeeper, MariaDB, the advisory locks or one of Redlock's nodes fails here. (etcd is
simulated with a model of its own gateway under the real etcd backend, held to a real
etcd in test_etcd_model_matches.py.)

Time: each step is sent far from any lease's end (a step that would fall within the
margin of one, ``MARGIN`` or its kind's, waits until it is past), so a loaded machine's
delays cannot decide an outcome either way."""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from typing import Any

import pytest

import fencelock
from fencelock import clock
from fencelock.backends.redis.resp import Script
from fencelock.backends.redis.scripts import LockKeys, ms
from fencelock.backends.redlock.backend import PHASE1, PHASE2, RELEASE, RENEW, AsyncRedlockBackend
from fencelock.backends.redlock.round import Round, boolean_reply, phase_one_reply
from fencelock.engine import redlock as quorum_plan
from fencelock.engine.outcomes import Acquired, RenewedAsOf
from fencelock.primitives.lock import new_owner
from fencelock.sim.model import Granted, LeaseStore, RedlockNode, SessionStore
from tests.contract.conftest import BackendCase

LEASE_FAMILY = ("memory", "sqlite", "redis", "postgresql")
SESSION_FAMILY = ("zookeeper", "mysql", "advisory")
WHY_NOT = {
    "etcd": "simulated with its own gateway model: held to etcd in test_etcd_model_matches.py",
    "redlock": "of its own kind: one of its nodes is held to RedlockNode below",
    "redis+unix": "the same scripts as redis://, held to the model there",
    "redis+sentinel": "the same scripts as redis://, held to the model there",
    "redis+cluster": "the same scripts as redis://, held to the model there",
}
TTLS = (0.6, 4.0)  # a lease that a pass ends, and one that outlives a few
PASS = 1.5  # seconds a "pass" step lets go by
MARGIN = 0.4  # no step is sent closer than this to a lease's end
STEPS = 18
SEEDS = (1,)
# The lease family's plan meets every one of LEASE_SITUATIONS (asserted) on each kind's
# TTLs: a lease that is free, ended by its TTL, the owner's own, or another's when asked
# for, renewed or released; a lease renewed to a TTL longer, shorter or the same; and a
# step that the renewals of a lease decide (it would have ended, or not, without them).
LEASE_STEPS = 30
LEASE_SEEDS = (302,)
LEASE_SITUATIONS = {
    *(("acquire", held) for held in ("free", "expired", "mine", "other")),
    *(("renew", held) for held in ("expired", "mine", "other")),
    *(("renew", f"mine, to {change} TTL") for change in ("a longer", "a shorter", "the same")),
    *(("release", held) for held in ("expired", "mine", "other")),
    ("renew", "decides a later step"),
}


@dataclass(frozen=True)
class Timing:
    """A kind's TTLs, how long a pass lasts, and how far from a lease's end steps keep."""

    ttls: tuple[float, ...]
    pass_: float
    margin: float


TIMING: dict[str, Timing] = {}  # a kind whose leases need other TTLs than TTLS
DEFAULT_TIMING = Timing(TTLS, PASS, MARGIN)


@dataclass
class Step:
    op: str  # acquire, renew, release, pass, end (a client's session)
    who: int  # which of three owners (and, on the session family, clients)
    ttl: float


def plan(
    seed: int, ops: tuple[str, ...], ttls: tuple[float, ...] = TTLS, steps: int = STEPS
) -> list[Step]:
    rng = random.Random(seed)
    return [Step(rng.choice(ops), rng.randrange(3), rng.choice(ttls)) for _ in range(steps)]


def situation(key: tuple[str, float] | None, owner: str, now: float) -> str:
    """How the model holds a name (``key``: its holder and the end of its lease, by the
    clock ``now`` reads) when ``owner`` sends a step."""
    if key is None:
        return "free"
    if key[1] <= now:
        return "expired"
    return "mine" if key[0] == owner else "other"


def kind_of(backend: BackendCase) -> str:
    scheme = backend.url.split(":", 1)[0]
    return {"postgresql+advisory": "advisory", "mysql": "mysql"}.get(scheme, scheme)


async def _steer_clear(store: LeaseStore, name: str, started: float, margin: float) -> None:
    """Wait while the holder's lease ends within ``margin`` of now."""
    while True:
        now = clock.now() - started
        held = store.records.get(name)
        if held is None or abs(held.expires - now) >= margin:
            return
        await asyncio.sleep(2 * margin)


@pytest.mark.parametrize("seed", LEASE_SEEDS)
def test_the_lease_model_matches_the_servers(backend: BackendCase, name: str, seed: int) -> None:
    kind = kind_of(backend)
    if kind not in LEASE_FAMILY:
        pytest.skip(WHY_NOT.get(kind, "of the session family: held to its model below"))

    timing, met = TIMING.get(kind, DEFAULT_TIMING), set[tuple[str, str]]()

    async def main() -> list[str]:
        # PostgreSQL grants a lease again to its holder's resent try (same token, a new
        # TTL); Redis and SQLite answer that it is taken: the model does either.
        regrant = kind == "postgresql"
        store, owners, seen = LeaseStore(regrant=regrant), [new_owner() for _ in range(3)], []
        ops = ("acquire", "acquire", "renew", "release", "pass")
        given = 0.0  # the TTL the holder's lease was last given
        unrenewed: float | None = None  # when it would end had it not been renewed
        async with fencelock.aconnect(backend.url) as client:
            real, started = client.seam.backend, clock.now()
            for step in plan(seed, ops, timing.ttls, LEASE_STEPS):
                await _steer_clear(store, name, started, timing.margin)
                owner, now = owners[step.who], clock.now() - started
                if step.op == "pass":
                    await asyncio.sleep(timing.pass_)
                    continue
                held = store.records.get(name)
                key = None if held is None else (held.owner, held.expires)
                met.add((step.op, situation(key, owner, now)))
                if (
                    key is not None
                    and unrenewed is not None
                    and (unrenewed <= now) != (key[1] <= now)
                ):
                    met.add(("renew", "decides a later step"))
                if step.op == "acquire":
                    # Not renewed: each lease ends by its own TTL, as the model's do.
                    attempt = real.attempt(name, owner, step.ttl, renewed=False)
                    try:
                        theirs = isinstance(await attempt.try_acquire(), Acquired)
                    finally:
                        await attempt.close()
                    ours = isinstance(store.acquire(name, owner, step.ttl, now), Granted)
                    if ours:
                        given, unrenewed = step.ttl, None
                elif step.op == "renew":
                    renewed = await real.renew(name, owner, step.ttl)
                    theirs = bool(renewed)
                    # A renewal as of a keepalive sent earlier (etcd's, lazily sent) runs
                    # its TTL from then, not from now: so does the model's.
                    at = renewed.at - started if isinstance(renewed, RenewedAsOf) else now
                    ours = store.renew(name, owner, step.ttl, min(at, now))
                    if ours:
                        change = "a longer" if step.ttl > given else "a shorter"
                        change = "the same" if step.ttl == given else change
                        met.add((step.op, f"mine, to {change} TTL"))
                        given = step.ttl
                        if unrenewed is None and key is not None:
                            unrenewed = key[1]
                else:
                    theirs = await real.release(name, owner)
                    ours = store.release(name, owner, now)
                    unrenewed = None if ours else unrenewed
                seen.append(f"{step.op} {step.who} {step.ttl}: server {theirs}, model {ours}")
                assert theirs == ours, "\n".join(seen)
            for owner in owners:
                await real.release(name, owner)
        return seen

    outcomes = asyncio.run(main())
    assert any("acquire" in line and "server True" in line for line in outcomes)
    assert met >= LEASE_SITUATIONS, f"never met: {sorted(LEASE_SITUATIONS - met)}"


@pytest.mark.parametrize("seed", SEEDS)
def test_the_session_model_matches_the_servers(backend: BackendCase, name: str, seed: int) -> None:
    kind = kind_of(backend)
    if kind not in SESSION_FAMILY:
        pytest.skip(WHY_NOT.get(kind, "of the TTL-lease family: held to its model above"))

    async def main() -> list[str]:
        store, seen = SessionStore(), []
        clients: list[fencelock.AsyncClient | None] = [None, None, None]
        sessions = [0, 0, 0]
        owners = [new_owner() for _ in range(3)]
        try:
            for step in plan(seed, ("acquire", "acquire", "release", "end", "pass")):
                who, now = step.who, clock.now()
                if step.op == "pass":  # sessions stay alive: their clients keep them
                    await asyncio.sleep(PASS / 3)
                    continue
                if clients[who] is None:
                    clients[who] = fencelock.aconnect(backend.url)
                    await clients[who].__aenter__()
                    sessions[who] = store.open_session(3600, now)
                real = clients[who].seam.backend
                if step.op == "end":
                    await clients[who].__aexit__(None, None, None)
                    clients[who] = None
                    store.end_session(sessions[who])
                    owners[who] = new_owner()
                    seen.append(f"end {who}")
                    continue
                if step.op == "acquire":
                    attempt = real.attempt(name, owners[who], 30.0)
                    try:
                        theirs = isinstance(await attempt.try_acquire(), Acquired)
                    finally:
                        await attempt.close()
                    mine = store.acquire(name, owners[who], sessions[who], now)
                    ours = isinstance(mine, Granted)
                else:
                    theirs = await real.release(name, owners[who])
                    ours = store.release(name, owners[who], sessions[who], now)
                seen.append(f"{step.op} {who}: server {theirs}, model {ours}")
                assert theirs == ours, "\n".join(seen)
        finally:
            for client in clients:
                if client is not None:
                    await client.__aexit__(None, None, None)
        return seen

    outcomes = asyncio.run(main())
    assert any("acquire" in line and "server True" in line for line in outcomes)


# -- one of Redlock's nodes -------------------------------------------------------------

REDLOCK_OPS = ("phase one", "phase one", "phase two", "phase two", "renew", "release", "pass")
REDLOCK_STEPS = 48
REDLOCK_SEEDS = (1133,)  # meets every one of REDLOCK_SITUATIONS (asserted)
# A phase two stamps one more than the counter its owner read, or (leaping) than a
# counter another node reported this far (in microseconds: 1000 s) ahead of this one's.
LEAP = 1_000_000_000
COUNTER_SLACK = 500_000  # µs: counters read from the node's clock agree this closely
REDLOCK_SITUATIONS = {
    *(("phase one", held) for held in ("free", "expired", "mine", "other")),
    ("phase one", "reads a stamp back"),  # won, the counter a leaping phase two stamped
    *(("phase two", held) for held in ("expired", "mine", "mine, leaping", "other")),
    *((op, held) for op in ("renew", "release") for held in ("expired", "mine", "other")),
}


def _node_said(answer: Any, owners: list[str]) -> str:
    """An answer of the node or of the model, as a line: won, busy (whose), or a flag."""
    if isinstance(answer, bool | quorum_plan.NodeError):
        return str(answer)
    if isinstance(answer, quorum_plan.NodeWon | int):
        return "won"
    if isinstance(answer, quorum_plan.NodeBusy):
        remaining, owner = answer.remaining, answer.owner
    else:
        remaining, owner = answer
    who = owners.index(owner) if owner in owners else owner
    return f"busy {remaining:.2f}s by {who}"


def _agree(theirs: Any, ours: Any) -> bool:
    """The node's answer and the model's: the same flag; both won, reading counters
    within COUNTER_SLACK; or both busy, by the same owner, remaining times within MARGIN."""
    if isinstance(theirs, bool) or isinstance(ours, bool):
        return theirs is ours
    if isinstance(theirs, quorum_plan.NodeWon) and isinstance(ours, int):
        return abs(theirs.counter - ours) <= COUNTER_SLACK
    if isinstance(theirs, quorum_plan.NodeBusy) and isinstance(ours, tuple):
        remaining, owner = ours
        near = theirs.remaining is not None and abs(theirs.remaining - remaining) < MARGIN
        return near and theirs.owner == owner
    return False


async def _steer_clear_node(node: RedlockNode, name: str) -> None:
    """Wait while the key on the node ends within MARGIN of now."""
    while True:
        key = node.keys.get(name)
        if key is None or abs(key[1] - node.clock(clock.now())) >= MARGIN:
            return
        await asyncio.sleep(2 * MARGIN)


@pytest.mark.parametrize("seed", REDLOCK_SEEDS)
def test_a_redlock_node_matches_its_model(backend: BackendCase, name: str, seed: int) -> None:
    """Phase one, phase two, renew and release on one of the redlock URL's nodes (each
    the backend's own script with the backend's arguments, sent down its own connection
    to the node as one of its steps) and on a :class:`RedlockNode`."""
    if kind_of(backend) != "redlock":
        pytest.skip("Redlock's node scripts run on redlock:// only")
    met: set[tuple[str, str]] = set()

    async def main() -> list[str]:
        owners, seen = [new_owner() for _ in range(3)], []
        read = [0, 0, 0]  # the counter each owner read in its last phase one won
        keys, leaps = LockKeys.of(name), random.Random(seed + 1)
        async with fencelock.aconnect(backend.url) as client:
            real = client.seam.backend
            assert isinstance(real, AsyncRedlockBackend)
            link = real.links[0]

            async def ask(command: bytes, script: Script, phase_one: bool = False) -> Any:
                """The node's answer, as a step of the backend reads it (a quorum of one)."""
                step = Round([link], 1, phase_one_reply if phase_one else boolean_reply)
                step.send(command, script)
                return (await step.outcome())[0]

            # The model's clock reads the node's (the Unix time), moving with clock.now().
            node = RedlockNode(started=clock.now() - time.time())
            for step in plan(seed, REDLOCK_OPS, TTLS, REDLOCK_STEPS):
                await _steer_clear_node(node, name)
                owner, now = owners[step.who], clock.now()
                if step.op == "pass":
                    await asyncio.sleep(PASS)
                    continue
                held = situation(node.keys.get(name), owner, node.clock(now))
                detail = f"{step.ttl}"
                if step.op == "phase one":
                    call = PHASE1.call((keys.lock, keys.token), (owner, ms(step.ttl)))
                    theirs = await ask(call, PHASE1, phase_one=True)
                    ours: Any = node.phase_one(name, owner, step.ttl, now)
                    if isinstance(theirs, quorum_plan.NodeWon):
                        read[step.who] = theirs.counter
                    if isinstance(ours, int) and ours > node.clock(now) * 1_000_000 + LEAP // 2:
                        met.add((step.op, "reads a stamp back"))
                elif step.op == "phase two":
                    leaping = leaps.randrange(2) == 1
                    token = quorum_plan.phase_two_token(
                        [read[step.who]] + [read[step.who] + LEAP] * leaping
                    )
                    call = PHASE2.call((keys.lock, keys.token), (owner, token))
                    theirs = await ask(call, PHASE2)
                    ours = node.phase_two(name, owner, token, now)
                    held += ", leaping" if leaping and held == "mine" else ""
                    detail = f"{token}"
                elif step.op == "renew":
                    theirs = await ask(RENEW.call((keys.lock,), (owner, ms(step.ttl))), RENEW)
                    ours = node.renew(name, owner, step.ttl, now)
                else:
                    theirs = await ask(RELEASE.call((keys.lock,), (owner, keys.channel)), RELEASE)
                    ours = node.release(name, owner, now)
                    detail = ""
                met.add((step.op, held))
                seen.append(
                    f"{step.op} {step.who} {detail} ({held}): server "
                    f"{_node_said(theirs, owners)}, model {_node_said(ours, owners)}"
                )
                assert _agree(theirs, ours), "\n".join(seen)
            for owner in owners:
                await ask(RELEASE.call((keys.lock,), (owner, "")), RELEASE)
        return seen

    asyncio.run(main())
    assert met >= REDLOCK_SITUATIONS, f"never met: {sorted(REDLOCK_SITUATIONS - met)}"
