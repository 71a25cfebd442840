"""The pause nemesis: a pause lasts its drawn length, and until another client wrote."""

from __future__ import annotations

from dataclasses import dataclass, field

from fencelock.check.history import Op
from fencelock.check.nemesis import OVERTAKE_CAP, Pause
from fencelock.check.servers import ServerSet
from fencelock.testing.process import ServerProcess

TTL = 0.5


@dataclass
class Recorder:
    """Keeps what a nemesis did to the run, for the assertions."""

    ttl: float = TTL
    servers: ServerSet | None = None
    written: int = 0
    frozen: set[int] = field(default_factory=set)
    ops: list[Op] = field(default_factory=list)

    def freeze(self, client: int) -> bool:
        self.frozen.add(client)
        return True

    def thaw(self, client: int) -> None:
        self.frozen.discard(client)

    def crash(self, client: int, token: int | None, detail: str) -> int:
        raise AssertionError("a pause kills nobody")

    def cut(self, client: int) -> None:
        raise AssertionError("a pause cuts no link")

    def heal(self, client: int) -> None:
        raise AssertionError("a pause cuts no link")

    def kill_server(self, node: ServerProcess) -> None:
        raise AssertionError("a pause kills no server")

    def restart(self, node: ServerProcess) -> None:
        raise AssertionError("a pause kills no server")

    def end_session(self, client: int, token: int | None) -> str:
        raise AssertionError("a pause ends no session")

    def record(self, op: Op) -> None:
        self.ops.append(op)

    def note(self, text: str) -> None:
        return None

    def writes(self) -> int:
        return self.written


def _struck(h: Recorder) -> tuple[Pause, float]:
    pause = Pause(seed=1, ttl=TTL, start=0.0)
    now = pause.next_at
    assert pause.on_hold(h, now, client=3, token=7)
    assert h.frozen == {3}
    assert pause.active is not None
    return pause, pause.active.until


def test_a_pause_nobody_overtook_goes_on_until_someone_writes() -> None:
    h = Recorder()
    pause, until = _struck(h)
    pause.poll(h, until + 0.5)
    assert h.frozen == {3}, "healed before anyone else wrote"
    h.written += 1
    pause.poll(h, until + 0.6)
    assert h.frozen == set()
    (op,) = h.ops
    assert "until another client wrote" in op.detail
    assert op.end - op.start > until - op.start


def test_a_pause_someone_overtook_heals_on_time() -> None:
    h = Recorder()
    pause, until = _struck(h)
    h.written += 1
    pause.poll(h, until - 0.01)
    assert h.frozen == {3}
    pause.poll(h, until)
    assert h.frozen == set()
    assert "until another client wrote" not in h.ops[0].detail


def test_a_pause_heals_at_the_cap_even_if_nobody_writes() -> None:
    h = Recorder()
    pause, _ = _struck(h)
    assert pause.active is not None
    start = pause.active.start
    pause.poll(h, start + OVERTAKE_CAP * TTL - 0.01)
    assert h.frozen == {3}
    pause.poll(h, start + OVERTAKE_CAP * TTL)
    assert h.frozen == set()
