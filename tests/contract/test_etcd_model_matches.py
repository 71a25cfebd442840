"""The etcd model (:mod:`fencelock.sim.etcd`) held to a real etcd: the same seeded
sequence of backend operations through two real ``AsyncEtcdBackend``s, one on the
server, one straight on the model, comes to the same outcomes step by step; and the
gateway requests the backend sends are answered alike, field by field.

Time: ``clock.now`` moves only between steps, so both backends see the same readings
and make the same keepalive decisions; the model's clock is that one. No step is sent
within ``BEFORE`` of an etcd lease's end nor ``AFTER`` past it (a real etcd revokes an
expired lease within 500 ms), so a loaded machine's delays cannot decide an outcome."""

from __future__ import annotations

import asyncio
import bisect
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from fencelock import clock
from fencelock.backends import open_async_backend
from fencelock.backends.etcd import gateway
from fencelock.backends.etcd.backend import AsyncEtcdBackend
from fencelock.backends.etcd.http import Gateway
from fencelock.backends.etcd.options import etcd_options
from fencelock.engine.outcomes import Acquired, Busy
from fencelock.engine.urls import parse_url
from fencelock.errors import FencelockError
from fencelock.primitives.lock import new_owner
from fencelock.sim.etcd import (
    DirectTransport,
    EtcdModel,
    SimEtcdGateway,
    SimEtcdWire,
    direct_etcd_backend,
)
from tests.contract.conftest import BackendCase

TTLS = (2.0, 5.0)  # whole seconds, etcd's smallest lease and a longer one
PASSES = (1.0, 3.0)  # seconds a "pass" step lets go by: the 2 s leases end in the longer
BEFORE, AFTER = 0.4, 1.0  # no step this close before an etcd lease ends, or after
STEPS = 30
OPS = ("acquire", "acquire", "acquire", "renew", "release", "release", "inspect", "pass")


def _etcd_only(backend: BackendCase) -> None:
    if not backend.url.startswith("etcd://"):
        pytest.skip("the etcd model is held to etcd only")


@dataclass(frozen=True)
class Step:
    op: str
    who: int  # which of three owners
    ttl: float
    renewed: bool  # in the client's shared session, or in an etcd lease of its own
    seconds: float  # a pass's


def plan(seed: int) -> list[Step]:
    rng = random.Random(seed)
    return [
        Step(
            rng.choice(OPS),
            rng.randrange(3),
            rng.choice(TTLS),
            rng.random() < 0.7,
            rng.choice(PASSES),
        )
        for _ in range(STEPS)
    ]


class SteppedClock:
    """``clock.now`` for the run: the real clock as read when the step began."""

    def __init__(self, real: Callable[[], float]) -> None:
        self.real, self.at = real, real()

    def __call__(self) -> float:
        return self.at

    def step(self) -> None:
        self.at = self.real()


async def _steer_clear(model: EtcdModel, real: Callable[[], float]) -> None:
    """Wait while an etcd lease ends within BEFORE of now, or ended less than AFTER ago."""
    while True:
        now = real()
        near = [lease.expires for lease in model.leases.values()]
        near = [ends for ends in near if ends - BEFORE <= now <= ends + AFTER]
        if not near:
            return
        await asyncio.sleep(max(near) + AFTER - now + 0.01)


class Side:
    """One backend, the server's or the model's, and what it granted."""

    def __init__(self, backend: AsyncEtcdBackend, owners: list[str]) -> None:
        self.backend, self.owners = backend, owners
        self.tokens: dict[str, int] = {}  # owner: the token it was granted last

    async def do(self, step: Step, name: str) -> str:
        owner = self.owners[step.who]
        try:
            if step.op == "acquire":
                attempt = self.backend.attempt(name, owner, step.ttl, renewed=step.renewed)
                try:
                    result = await attempt.try_acquire()
                finally:
                    await attempt.close()
                if isinstance(result, Acquired):
                    assert result.token > max(self.tokens.values(), default=0)
                    self.tokens[owner] = result.token
                    return "acquired"
                assert isinstance(result, Busy)
                return "busy"
            if step.op == "renew":
                return f"renewed {bool(await self.backend.renew(name, owner, step.ttl))}"
            if step.op == "release":
                return f"released {await self.backend.release(name, owner)}"
            return await self.inspect(name)
        except FencelockError as exc:
            return f"raised {type(exc).__name__}"

    async def inspect(self, name: str) -> str:
        info = await self.backend.inspect(name)
        if info is None or info.owner is None:
            return f"inspect: free, ever held {info is not None}"
        who = self.owners.index(info.owner)
        token = "its token" if self.tokens.get(info.owner) == info.token else "another token"
        return f"inspect: held by {who} ({token}), {info.waiters} waiting"


@pytest.mark.parametrize("seed", [32, 100])
def test_the_etcd_model_matches_etcd(
    backend: BackendCase, name: str, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    _etcd_only(backend)
    real = clock.now
    stepped = SteppedClock(real)
    monkeypatch.setattr(clock, "now", stepped)

    async def main() -> list[str]:
        model, owners, seen = EtcdModel(stepped), [new_owner() for _ in range(3)], []
        real_backend = open_async_backend(backend.url)
        assert isinstance(real_backend, AsyncEtcdBackend)
        server, ours = Side(real_backend, owners), Side(direct_etcd_backend(model), owners)
        await server.backend.open()
        try:
            for step in plan(seed):
                await _steer_clear(model, real)
                stepped.step()
                if step.op == "pass":
                    await asyncio.sleep(step.seconds)
                    continue
                theirs, mine = await server.do(step, name), await ours.do(step, name)
                seen.append(f"{step}: server {theirs}, model {mine}")
                assert theirs == mine, "\n".join(seen)
            for owner in owners:
                stepped.step()
                await server.backend.release(name, owner)
        finally:
            await server.backend.close()
            await ours.backend.close()
        assert model.unmodeled == []
        return seen

    outcomes = asyncio.run(main())
    assert sum("server acquired" in line for line in outcomes) >= 2
    assert any("server busy" in line for line in outcomes)


# --- the gateway's answers, field by field -------------------------------------------------


def _normalized(replies: list[Any]) -> list[Any]:
    """``replies`` without what differs between servers: lease IDs become their order of
    appearance; our keys' create and mod revisions their rank, and a header's revision
    the rank of the last of ours at or before it (other writes to the server between
    ours change nothing); a header keeps only its revision; a lease's TTL says only
    whether it is within a second of the TTL granted."""
    ours: set[int] = set()
    leases: dict[str, int] = {}

    def collect(value: Any) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                if key in ("create_revision", "mod_revision"):
                    ours.add(int(inner))
                elif key in ("ID", "lease"):
                    leases.setdefault(str(inner), len(leases))
                collect(inner)
        elif isinstance(value, list):
            for inner in value:
                collect(inner)

    def rewrite(value: Any) -> Any:
        if isinstance(value, list):
            return [rewrite(inner) for inner in value]
        if not isinstance(value, dict):
            return value
        out: dict[str, Any] = {}
        for key, inner in value.items():
            if key in ("cluster_id", "member_id", "raft_term"):
                continue
            if key in ("create_revision", "mod_revision"):
                out[key] = f"r{ranked.index(int(inner))}"
            elif key == "revision":
                out[key] = f"r{bisect.bisect_right(ranked, int(inner)) - 1}"
            elif key in ("ID", "lease"):
                out[key] = f"lease{leases[str(inner)]}"
            else:
                out[key] = rewrite(inner)
        if "grantedTTL" in out and "TTL" in out:
            out["TTL"] = 0 <= int(out["grantedTTL"]) - int(out["TTL"]) <= 1
        return out

    collect(replies)
    ranked = sorted(ours)
    return [rewrite(reply) for reply in replies]


async def _script(
    call: Callable[[str, dict[str, Any]], Any], stream: Any, root: bytes
) -> list[Any]:
    """The backend's kinds of request, in a row; every answer (an error: its type and
    message)."""
    b64 = gateway.b64
    answers: list[Any] = []

    async def ask(path: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            reply: dict[str, Any] = await call(path, body)
        except FencelockError as exc:
            answers.append(f"{type(exc).__name__}: {str(exc).split(': ')[-1]}")
            return {}
        answers.append(reply)
        return reply

    queue, key, other, record = root + b"q/", root + b"q/k1", root + b"q/k2", root + b"rec"
    watching = stream("watch", gateway.watch_prefix(root))
    deletes = stream("watch", gateway.watch_create(key))
    answers += [await anext(watching), await anext(deletes)]
    await ask("lease/grant", {"TTL": "1"})  # raised to etcd's smallest
    lease = gateway.integer(await ask("lease/grant", {"TTL": "30"}), "ID")
    await ask("kv/txn", gateway.enqueue_txn(key, b"me", lease, queue))
    await ask("kv/txn", gateway.enqueue_txn(key, b"me", lease, queue))
    await ask("kv/put", {"key": b64(other), "value": b64(b"you")})
    for request in (
        gateway.range_request(queue),
        gateway.range_request(queue, first=True),
        gateway.range_request(queue, last_before=10**9),
        gateway.range_request(queue, count_only=True),
        {
            "key": b64(queue),
            "range_end": b64(gateway.prefix_end(queue)),
            "limit": 1,
            "keys_only": True,
        },
        gateway.key_request(root + b"nothing"),
    ):
        await ask("kv/range", request)
    await ask("lease/timetolive", {"ID": str(lease), "keys": True})
    await ask("lease/keepalive", {"ID": str(lease)})
    await ask("kv/txn", gateway.delete_if_value_txn(key, b"not me", (record, b"1 x")))
    await ask("kv/txn", gateway.move_txn(key, 1, b"me", lease))  # not that incarnation
    await ask("kv/txn", gateway.delete_if_value_txn(key, b"me", (record, b"1 me")))
    await ask("kv/txn", gateway.delete_if_value_txn(key, b"me", (record, b"1 me")))
    await ask("kv/txn", gateway.enqueue_txn(key, b"me", lease, queue))
    await ask("lease/revoke", {"ID": str(lease)})
    await ask("lease/revoke", {"ID": str(lease)})
    await ask("lease/keepalive", {"ID": str(lease)})
    await ask("lease/timetolive", {"ID": str(lease)})
    await ask("kv/txn", gateway.enqueue_txn(key, b"me", lease, queue))
    await ask("kv/deleterange", {"key": b64(root), "range_end": b64(gateway.prefix_end(root))})
    for watch, count in ((watching, 6), (deletes, 2)):
        for _ in range(count):
            answers.append(await asyncio.wait_for(anext(watch), 5))
        await watch.aclose()
    return answers


def test_the_etcd_model_answers_the_backends_requests_as_etcd_does(
    backend: BackendCase, name: str
) -> None:
    _etcd_only(backend)
    parsed = parse_url(backend.url)
    options = etcd_options(parsed)
    server = Gateway(options, backend.url)
    model = EtcdModel(clock.now)
    ours = SimEtcdGateway(options, backend.url, SimEtcdWire(model, DirectTransport(), options))
    root = f"model-check/{name}/".encode()

    async def both() -> tuple[list[Any], list[Any]]:
        try:
            theirs = await _script(server.call, server.stream, root)
            mine = await _script(ours.call, ours.stream, root)
        finally:
            await server.close()
        return theirs, mine

    theirs, mine = asyncio.run(both())
    for number, (a, b) in enumerate(zip(_normalized(theirs), _normalized(mine), strict=True)):
        assert a == b, f"answer {number}: server {a}\nmodel {b}"
    assert model.unmodeled == []
