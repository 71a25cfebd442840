"""A backend whose blocking calls start off the loop (``steps_off_the_loop``) runs its
stepped path on the caller's thread with no loop running until that path suspends
(``SharedLoop.run_stepped``). Whatever needs a running loop there (a task, a timer, a
new connection) must first move onto it: ``await stepping.onto_the_loop()``, or
``stepping.running_loop()``. This walks those backends' source and fails on a call that
needs the loop in a function that has not moved onto it by then."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import fencelock

SRC = Path(fencelock.__file__).parent

# asyncio calls that raise "no running event loop" (or make a timer) off the loop
NEEDS_A_LOOP = {
    "get_running_loop",
    "ensure_future",
    "create_task",
    "wait",
    "wait_for",
    "gather",
    "sleep",
    "open_connection",
    "timeout",
    "timeout_at",
    "Event",
    "Queue",
}
# fencelock's own helpers built on those (stepping.within and bounds.bounded move onto
# the loop themselves)
NEEDS_A_LOOP_TOO = {"insisting", "abandoning"}
MOVES_ONTO_THE_LOOP = {"onto_the_loop", "running_loop"}

# Functions that only ever run as tasks of their own, started on the loop.
ON_THE_LOOP_ONLY = {
    ("backends/etcd/backend.py", "again"),
    ("backends/etcd/session.py", "_send_keepalive"),
    ("backends/etcd/session.py", "_list_keys"),
    ("backends/etcd/name_watch.py", "_follow"),
    # reached only from SharedLoop.run (never stepped): the waits, watches, renewals
    ("backends/etcd/backend.py", "wait"),
    ("backends/etcd/backend.py", "watch_delete"),
    ("backends/etcd/backend.py", "open"),
    ("backends/etcd/name_watch.py", "changed"),
    ("backends/etcd/name_watch.py", "_start"),
    ("backends/etcd/http.py", "stream"),
    ("backends/etcd/wire.py", "stream"),
}


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Attribute):
        if isinstance(func.value, ast.Name) and func.value.id == "asyncio":
            return func.attr
        if func.attr in NEEDS_A_LOOP_TOO | MOVES_ONTO_THE_LOOP:
            return func.attr
        return None
    if isinstance(func, ast.Name) and func.id in NEEDS_A_LOOP_TOO | MOVES_ONTO_THE_LOOP:
        return func.id
    return None


def _is_sleep_zero(call: ast.Call) -> bool:
    return (
        len(call.args) == 1 and isinstance(call.args[0], ast.Constant) and call.args[0].value == 0
    )


def _own_calls(function: ast.AST) -> list[ast.Call]:
    """The calls in ``function``'s body, in source order, not those of nested defs."""
    found: list[ast.Call] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                continue
            if isinstance(child, ast.Call):
                found.append(child)
            visit(child)

    visit(function)
    return sorted(found, key=lambda call: (call.lineno, call.col_offset))


def unmoved_calls(source: str, relative: str) -> list[str]:
    """Where ``source`` (the module at ``relative``, under src/fencelock) needs a running
    loop before its function moved onto one."""
    tree = ast.parse(source, relative)
    problems = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if (relative, function.name) in ON_THE_LOOP_ONLY:
            continue
        for call in _own_calls(function):
            name = _called_name(call)
            if name in MOVES_ONTO_THE_LOOP:
                break
            needs = name in NEEDS_A_LOOP or name in NEEDS_A_LOOP_TOO
            if needs and not (name == "sleep" and _is_sleep_zero(call)):
                problems.append(f"{relative}:{call.lineno} {function.name}(): {name}")
                break
    return problems


def off_the_loop_packages() -> list[Path]:
    """The backends' packages that declare ``steps_off_the_loop=True``."""
    return sorted(
        {
            path.parent
            for path in (SRC / "backends").glob("*/*.py")
            if "steps_off_the_loop=True" in path.read_text()
        }
    )


def test_some_backend_starts_its_stepped_calls_off_the_loop() -> None:
    assert off_the_loop_packages() == [SRC / "backends" / "etcd"]


@pytest.mark.parametrize("package", off_the_loop_packages(), ids=lambda p: p.name)
def test_what_needs_a_loop_moves_onto_it_first(package: Path) -> None:
    problems = [
        problem
        for path in sorted(package.glob("*.py"))
        for problem in unmoved_calls(path.read_text(), path.relative_to(SRC).as_posix())
    ]
    assert not problems, "needs a running loop before stepping.onto_the_loop():\n" + "\n".join(
        problems
    )


def test_the_check_finds_a_call_before_the_move_and_none_after_it() -> None:
    sample = (
        "import asyncio\n"
        "async def moved():\n"
        "    await stepping.onto_the_loop()\n"
        "    asyncio.get_running_loop()\n"
        "async def unmoved():\n"
        "    await asyncio.sleep(0)\n"
        "    await asyncio.sleep(1)\n"
        "async def task_body():\n"
        "    await asyncio.sleep(1)\n"
    )
    assert unmoved_calls(sample, "sample.py") == [
        "sample.py:7 unmoved(): sleep",
        "sample.py:9 task_body(): sleep",
    ]


def test_every_function_said_to_run_on_the_loop_only_exists() -> None:
    defined = {
        (path.relative_to(SRC).as_posix(), node.name)
        for package in off_the_loop_packages()
        for path in package.glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    assert ON_THE_LOOP_ONLY <= defined
