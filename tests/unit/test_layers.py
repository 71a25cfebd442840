"""The layers of docs/architecture.md point down only: checked on the import statements."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import fencelock

ROOT = Path(fencelock.__file__).parent

# Deeper layers first; a unit may import only units of a lower rank (or itself).
LIBRARY_RANKS = {
    "errors": 0,
    "clock": 0,
    "log": 0,  # the "fencelock" logger, quiet unless the application configures logging
    "blocking_call": 1,  # a coroutine run as a plain call; its requests' end (clock)
    "aio": 2,
    "engine": 1,
    "redaction": 1,  # what of a command line the lock store may show
    "forking": 1,
    "holder": 2,  # masks passwords with engine.urls.redact
    "metrics": 3,
    "backends": 3,
    "sql": 4,
    "lease": 4,
    "fencing": 5,  # sqlite_fence runs fencelock.sql's fence check
    "tracing": 4,  # spans around an acquire, for primitives
    "client_leases": 5,
    "renewer": 5,
    "stopping": 5,
    "client_internals": 6,
    "primitives": 7,
    "client": 8,
    "group": 8,  # assign(), beside the client's groups
    "run_once": 9,
    "__init__": 10,
}
# The tools stand on the library; among themselves only these imports are allowed.
TOOLS_MAY_IMPORT = {
    "toolkit": set(),
    "testing": set(),
    "check": {"toolkit", "testing", "integrations"},  # --fence-with sqlalchemy
    "demo": {"toolkit"},
    "cli": {"check", "demo", "toolkit", "testing"},
    "compat": set(),  # other libraries' faces, over the public API
    "sim": set(),  # the deterministic simulator: the real client against model servers
    "integrations": set(),  # other libraries' fences (SQLAlchemy, Django), Celery's tasks
}


def unit_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports(path: Path) -> Iterator[str]:
    """The fencelock modules ``path`` imports at run time (not under TYPE_CHECKING)."""
    tree = ast.parse(path.read_text())
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for inner in ast.walk(node)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fencelock"):
            if node.module == "fencelock":
                yield from (f"fencelock.{alias.name}" for alias in node.names)
            else:
                yield str(node.module)
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.startswith("fencelock"))


def edges() -> Iterator[tuple[str, str, str]]:
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT).with_suffix("")
        module = ".".join(("fencelock", *relative.parts)).removesuffix(".__init__")
        for target in imports(path):
            source_unit, target_unit = unit_of(module), unit_of(target)
            if source_unit != target_unit:
                yield str(relative), source_unit, target_unit


def allowed(source: str, target: str) -> bool:
    if source in TOOLS_MAY_IMPORT:
        return target in LIBRARY_RANKS or target in TOOLS_MAY_IMPORT[source]
    return target in LIBRARY_RANKS and LIBRARY_RANKS[target] < LIBRARY_RANKS[source]


def test_every_unit_has_a_layer() -> None:
    units = {p.stem for p in ROOT.glob("*.py")} | {
        p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()
    }
    assert units <= set(LIBRARY_RANKS) | set(TOOLS_MAY_IMPORT), units


def test_imports_point_down_only() -> None:
    wrong = [f"{path}: {src} -> {tgt}" for path, src, tgt in edges() if not allowed(src, tgt)]
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


def test_the_rule_sees_an_upward_import() -> None:
    assert not allowed("backends", "client")
    assert not allowed("check", "demo")
    assert allowed("cli", "check")


# Backend families: only the registry (fencelock.backends) imports one, when its scheme is
# used, so a plain install never imports a driver. redlock runs on the redis family's wire
# and scripts, with the same driver and extra.
FAMILIES = {"redis", "redlock", "etcd", "zookeeper", "postgresql", "mysql", "sqlite", "memory"}
FAMILY_MAY_IMPORT = {"redlock": {"redis"}}
# The simulator runs the real etcd backend against its model of etcd (the backend's own
# wire, no driver), and the real Redis and Redlock backends against its model of Redis
# (which runs the backends' scripts; the simulator puts a Redis and an etcd bug back by
# patching the backend); the simulator's etcd, redis and redlock families load them when
# a run asks, and a bug's patch when that bug is put back.
OUTSIDE_MAY_IMPORT = {
    "sim/etcd.py": {"etcd"},
    "sim/redis.py": {"redis"},
    "sim/redis_model.py": {"redis"},
    "sim/bugs.py": {"redis"},
    "sim/historical.py": {"etcd"},
    "sim/redlock.py": {"redlock"},
    "sim/sqlite_host.py": {"sqlite"},
    "sim/sqlite_guess.py": {"sqlite"},
}


def family_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] == ["fencelock", "backends"] and len(parts) > 2 and parts[2] in FAMILIES:
        return parts[2]
    return None


def test_only_the_registry_imports_a_backend_family() -> None:
    registry = ROOT / "backends" / "__init__.py"
    wrong = []
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT)
        module = ".".join(("fencelock", *relative.with_suffix("").parts))
        own = family_of(module)
        allowed_families = {own} | FAMILY_MAY_IMPORT.get(own or "", set())
        allowed_families |= OUTSIDE_MAY_IMPORT.get(relative.as_posix(), set())
        for target in imports(path):
            family = family_of(target)
            if path != registry and family is not None and family not in allowed_families:
                wrong.append(f"{relative} imports {target}")
    assert not wrong, "\n".join(wrong)


def test_the_family_rule_sees_a_family() -> None:
    assert family_of("fencelock.backends.redis.from_client") == "redis"
    assert family_of("fencelock.backends.memory") == "memory"
    assert family_of("fencelock.backends.base") is None
    assert "fencelock.backends.redis" in set(imports(ROOT / "backends" / "__init__.py"))


def module_name(path: Path) -> str:
    relative = path.relative_to(ROOT).with_suffix("")
    return ".".join(("fencelock", *relative.parts)).removesuffix(".__init__")


MODULES = {module_name(path): path for path in ROOT.rglob("*.py")}


def every_import(path: Path) -> Iterator[str]:
    """The fencelock modules ``path`` imports anywhere: TYPE_CHECKING and function bodies
    too (``from package import module`` counts as the module)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name in MODULES)
        elif isinstance(node, ast.ImportFrom) and node.module in MODULES:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                yield submodule if submodule in MODULES else node.module


def cycle_in(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (its modules in order, the first repeated last), or None."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        path.append(node)
        for target in sorted(graph.get(node, ())):
            found = visit(target)
            if found:
                return found
        path.pop()
        done.add(node)
        return None

    for start in sorted(graph):
        found = visit(start)
        if found:
            return found
    return None


def test_no_import_circle_among_fencelock_modules() -> None:
    graph = {
        name: {target for target in every_import(path) if target != name}
        for name, path in MODULES.items()
    }
    circle = cycle_in(graph)
    assert circle is None, "import circle: " + " -> ".join(circle or [])


def test_the_circle_finder_sees_a_circle() -> None:
    assert cycle_in({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle_in({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None
    client = every_import(ROOT / "client.py")
    assert "fencelock.primitives.semaphore" in set(client)  # imported in a function body
