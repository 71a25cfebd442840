"""The simulator's models held to the real servers of their family: the same generated
sequences of acquire, renew, release, the passing of time and the end of a session, run
against a model (:mod:`fencelock.sim.model`) and through a real backend, must come to
the same outcomes, step by step. A model that drifts from Redis, SQLite, PostgreSQL,
ZooKeeper, MariaDB or the advisory locks fails here.

Time: each step is sent far from any lease's end (a step that would fall within
``MARGIN`` of one waits until it is past), so a loaded machine's delays cannot decide
an outcome either way."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

import pytest

import fencelock
from fencelock import clock
from fencelock.engine.outcomes import Acquired
from fencelock.primitives.lock import new_owner
from fencelock.sim.model import Granted, LeaseStore, SessionStore
from tests.contract.conftest import BackendCase

LEASE_FAMILY = ("memory", "sqlite", "redis", "postgresql")
SESSION_FAMILY = ("zookeeper", "mysql", "advisory")
WHY_NOT = {
    "etcd": "etcd's TTLs are whole seconds: a 0.6 s lease has no counterpart there",
    "redlock": "Redlock's independent nodes have no model yet",
    "redis+unix": "the same scripts as redis://, held to the model there",
    "redis+sentinel": "the same scripts as redis://, held to the model there",
    "redis+cluster": "the same scripts as redis://, held to the model there",
}
TTLS = (0.6, 4.0)  # a lease that a pass ends, and one that outlives a few
PASS = 1.5  # seconds a "pass" step lets go by
MARGIN = 0.4  # no step is sent closer than this to a lease's end
STEPS = 18
SEEDS = (1,)


@dataclass
class Step:
    op: str  # acquire, renew, release, pass, end (a client's session)
    who: int  # which of three owners (and, on the session family, clients)
    ttl: float


def plan(seed: int, ops: tuple[str, ...]) -> list[Step]:
    rng = random.Random(seed)
    return [Step(rng.choice(ops), rng.randrange(3), rng.choice(TTLS)) for _ in range(STEPS)]


def kind_of(backend: BackendCase) -> str:
    scheme = backend.url.split(":", 1)[0]
    return {"postgresql+advisory": "advisory", "mysql": "mysql"}.get(scheme, scheme)


async def _steer_clear(store: LeaseStore, name: str, started: float) -> None:
    """Wait while the holder's lease ends within MARGIN of now."""
    while True:
        now = clock.now() - started
        held = store.records.get(name)
        if held is None or abs(held.expires - now) >= MARGIN:
            return
        await asyncio.sleep(2 * MARGIN)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_lease_model_matches_the_servers(backend: BackendCase, name: str, seed: int) -> None:
    kind = kind_of(backend)
    if kind not in LEASE_FAMILY:
        pytest.skip(WHY_NOT.get(kind, "of the session family: held to its model below"))

    async def main() -> list[str]:
        # PostgreSQL grants a lease again to its holder's resent try (same token, a new
        # TTL); Redis and SQLite answer that it is taken: the model does either.
        regrant = kind_of(backend) == "postgresql"
        store, owners, seen = LeaseStore(regrant=regrant), [new_owner() for _ in range(3)], []
        async with fencelock.aconnect(backend.url) as client:
            real, started = client.seam.backend, clock.now()
            for step in plan(seed, ("acquire", "acquire", "renew", "release", "pass")):
                await _steer_clear(store, name, started)
                owner, now = owners[step.who], clock.now() - started
                if step.op == "pass":
                    await asyncio.sleep(PASS)
                    continue
                if step.op == "acquire":
                    attempt = real.attempt(name, owner, step.ttl)
                    try:
                        theirs = isinstance(await attempt.try_acquire(), Acquired)
                    finally:
                        await attempt.close()
                    ours = isinstance(store.acquire(name, owner, step.ttl, now), Granted)
                elif step.op == "renew":
                    theirs = bool(await real.renew(name, owner, step.ttl))
                    ours = store.renew(name, owner, step.ttl, now)
                else:
                    theirs = await real.release(name, owner)
                    ours = store.release(name, owner, now)
                seen.append(f"{step.op} {step.who} {step.ttl}: server {theirs}, model {ours}")
                assert theirs == ours, "\n".join(seen)
            for owner in owners:
                await real.release(name, owner)
        return seen

    outcomes = asyncio.run(main())
    assert any("acquire" in line and "server True" in line for line in outcomes)


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
