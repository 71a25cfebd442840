"""The library carries none of its own mutants: every bug the simulator puts back is a
patch that fencelock.sim applies to the code under test, so no module outside sim/
names one, reads a switch or imports the registry."""

from __future__ import annotations

import ast
import pathlib

import pytest

import fencelock
from fencelock.sim.bugs import KNOWN, reintroduced
from fencelock.sim.put_back import patched

LIBRARY = pathlib.Path(fencelock.__file__).parent
OUTSIDE_SIM = sorted(
    path for path in LIBRARY.rglob("*.py") if path.relative_to(LIBRARY).parts[0] != "sim"
)


def test_every_library_module_is_looked_at() -> None:
    names = {path.relative_to(LIBRARY).as_posix() for path in OUTSIDE_SIM}
    assert {"lease.py", "renewer.py", "engine/acquire.py", "backends/etcd/backend.py"} <= names


@pytest.mark.parametrize("path", OUTSIDE_SIM, ids=lambda p: p.relative_to(LIBRARY).as_posix())
def test_no_module_outside_the_simulator_names_a_bug(path: pathlib.Path) -> None:
    text = path.read_text()
    named = sorted(bug for bug in KNOWN if bug in text)
    assert not named, f"{path.name} names bugs the simulator puts back: {named}"
    imported = sorted(
        name
        for node in ast.walk(ast.parse(text))
        for name in _imported(node)
        if name.startswith("fencelock.sim") or name.endswith("reintroduced")
    )
    assert not imported, f"{path.name} imports the simulator's bugs: {imported}"


def _imported(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.module:
        return [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    return []


def test_the_historical_bugs_are_all_registered() -> None:
    historical = {
        "trust-from-reply",
        "no-trust-at-send",
        "late-try-forgotten",
        "extend-renewal-race",
        "reused-holder-id",
        "renewer-stale-round",
        "redlock-guessed-holder",
        "latch-stale-count-list",
        "etcd-late-release",
        "sqlite-dead-holder-guess",
    }
    assert historical <= set(KNOWN)


def test_putting_a_bug_back_patches_the_code_and_undoes_it() -> None:
    from fencelock.engine import acquire

    fixed = acquire.ttl_floor
    assert acquire.ttl_floor(5.0, unanswered=True) == 5.0
    with reintroduced("late-try-forgotten"):
        assert acquire.ttl_floor(5.0, unanswered=True) == float("inf")
    assert acquire.ttl_floor is fixed


def test_a_patched_method_is_restored() -> None:
    from fencelock.lease import LeaseBase

    fixed = vars(LeaseBase)["_sending"]
    with reintroduced("no-trust-at-send"):
        assert vars(LeaseBase)["_sending"] is not fixed
    assert vars(LeaseBase)["_sending"] is fixed


def test_an_inherited_method_patched_is_inherited_again_after() -> None:
    class Base:
        def answer(self) -> int:
            return 1

    class Child(Base):
        pass

    with patched(Child, "answer", lambda self: 2):
        assert (Child().answer(), Base().answer()) == (2, 1)
    assert "answer" not in vars(Child)
    assert Child().answer() == 1


def test_a_name_nothing_has_cannot_be_patched() -> None:
    with pytest.raises(AttributeError), patched(type("Empty", (), {}), "missing", 1):
        pass


def test_an_unknown_bug_is_refused() -> None:
    with pytest.raises(fencelock.ConfigError, match="no such historical bug: nope"):
        reintroduced("nope").__enter__()
