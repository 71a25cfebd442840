"""The partition-restart nemesis: the holder is cut off before the server is killed and
started again, and the cut outlasts any lease the holder may have extended to."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import pytest

from fencelock.check.history import Op
from fencelock.check.nemesis import (
    NETWORK_NEMESES,
    SERVER_NEMESES,
    PartitionRestart,
    build,
    parse_nemeses,
)
from fencelock.check.options import CheckOptions, validate
from fencelock.check.report.faults import fault_kind
from fencelock.check.servers import ServerSet
from fencelock.errors import ConfigError
from fencelock.testing.process import ServerProcess

TTL = 0.5


@dataclass
class Node:
    name: str


@dataclass
class Harness:
    """Records, in order, what the nemesis did to the run."""

    kind: str = "mysql"
    nodes: int = 1
    ttl: float = TTL
    steps: list[str] = field(default_factory=list)
    ops: list[Op] = field(default_factory=list)
    servers: ServerSet | None = field(init=False)

    def __post_init__(self) -> None:
        nodes = [cast(ServerProcess, Node(f"node-{n}")) for n in range(self.nodes)]
        self.servers = ServerSet(self.kind, nodes)  # type: ignore[arg-type]

    def freeze(self, client: int) -> bool:
        raise AssertionError("nobody is frozen")

    def thaw(self, client: int) -> None:
        raise AssertionError("nobody is frozen")

    def crash(self, client: int, token: int | None, detail: str) -> int:
        raise AssertionError("no client is killed")

    def cut(self, client: int) -> None:
        self.steps.append(f"cut {client}")

    def heal(self, client: int) -> None:
        self.steps.append(f"heal {client}")

    def kill_server(self, node: ServerProcess) -> None:
        self.steps.append(f"kill {node.name}")

    def restart(self, node: ServerProcess) -> None:
        self.steps.append(f"start {node.name}")

    def end_session(self, client: int, token: int | None) -> str:
        raise AssertionError("no session is ended")

    def record(self, op: Op) -> None:
        self.ops.append(op)

    def note(self, text: str) -> None:
        return None

    def writes(self) -> int:
        return 0


def _strike(h: Harness) -> PartitionRestart:
    nemesis = PartitionRestart(seed=1, ttl=TTL, start=0.0)
    assert nemesis.on_hold(h, nemesis.next_at, client=3, token=7)
    return nemesis


def test_the_holder_is_cut_off_before_the_server_is_killed_and_started_again() -> None:
    h = Harness()
    nemesis = _strike(h)
    assert h.steps == ["cut 3", "kill node-0", "start node-0"]
    assert nemesis.busy_clients() == {3}
    assert nemesis.faults == 1


def test_the_cut_heals_after_two_to_three_ttls_and_is_one_fault_on_the_holders_row() -> None:
    h = Harness()
    nemesis = _strike(h)
    assert nemesis.active is not None
    start, until = nemesis.active.start, nemesis.active.until
    assert 2 * TTL <= until - start <= 3 * TTL
    nemesis.poll(h, until - 0.01)
    assert h.steps[-1] == "start node-0", "healed early"
    nemesis.poll(h, until)
    assert h.steps[-1] == "heal 3"
    (op,) = h.ops
    assert (op.process, op.kind, op.token) == (3, "nemesis", 7)
    assert op.detail.startswith("partition-restart client 3 (token 7)")
    assert "on its data" in op.detail
    assert fault_kind(op) == "partition-restart"


def test_redlock_loses_a_minority_and_redis_restarts_empty() -> None:
    h = Harness(kind="redlock", nodes=5)
    _strike(h)
    killed = [s for s in h.steps if s.startswith("kill")]
    assert 1 <= len(killed) <= 2
    h = Harness(kind="redis")
    nemesis = _strike(h)
    assert nemesis.active is not None
    assert "(empty;" in nemesis.active.detail


def test_it_is_parsed_and_built_by_name_and_needs_servers_and_a_network() -> None:
    assert parse_nemeses("pause,partition-restart") == ("pause", "partition-restart")
    (nemesis,) = build(["partition-restart"], seed=1, ttl=TTL, start=0.0)
    assert isinstance(nemesis, PartitionRestart)
    assert "partition-restart" in SERVER_NEMESES
    assert "partition-restart" in NETWORK_NEMESES
    validate(CheckOptions(servers="mysql", nemeses=("partition-restart",)))
    with pytest.raises(ConfigError, match="partition-restart nemesis needs servers"):
        validate(CheckOptions(url="redis://127.0.0.1:6379/0", nemeses=("partition-restart",)))
    with pytest.raises(ConfigError, match="partition-restart nemesis needs servers"):
        validate(CheckOptions(nemeses=("partition-restart",)))
