"""A backend whose blocking calls start off the loop (``steps_off_the_loop``) runs its
stepped path on the caller's thread with no loop running until that path suspends
(``SharedLoop.run_stepped``). Whatever needs a running loop there (a task, a timer, a
new connection) must first move onto it: ``await blocking_call.onto_the_loop()``, or
``blocking_call.running_loop()``. This walks those backends' source and fails on a call that
needs the loop in a function that has not moved onto it by then."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import fencelock

SRC = Path(fencelock.__file__).parent

# asyncio calls that raise "no running event loop" (or make a timer) off the loop
NEEDS_A_LOOP = {
    "all_tasks",
    "as_completed",
    "Condition",
    "create_subprocess_exec",
    "create_subprocess_shell",
    "create_task",
    "current_task",
    "ensure_future",
    "Event",
    "gather",
    "get_event_loop",
    "get_running_loop",
    "Lock",
    "open_connection",
    "open_unix_connection",
    "Queue",
    "Semaphore",
    "shield",
    "sleep",
    "StreamReader",
    "TaskGroup",
    "timeout",
    "timeout_at",
    "Timeout",
    "to_thread",
    "wait",
    "wait_for",
    "wrap_future",
}
# fencelock's own helpers built on those (blocking_call.within and bounds.bounded move onto
# the loop themselves)
NEEDS_A_LOOP_TOO = {"within_or_recancel", "bounded_or_detach"}
MOVES_ONTO_THE_LOOP = {"onto_the_loop", "running_loop"}

# Functions (module, qualified name) that need no move of their own: they only ever run
# as tasks of their own started on the loop, or are reached only through
# SharedLoop.run (never stepped), or only after their caller moved onto the loop.
ON_THE_LOOP_ONLY = {
    # tasks' bodies
    ("backends/etcd/backend.py", "AsyncEtcdBackend._delete_eventually.again"),
    ("backends/etcd/session.py", "EtcdSession._send_keepalive"),
    ("backends/etcd/session.py", "EtcdSession._list_keys"),
    ("backends/etcd/name_watch.py", "EtcdNameWatch._follow"),
    # reached only through SharedLoop.run: waits, watches, opening and closing a client
    ("backends/etcd/backend.py", "AsyncEtcdBackend.open"),
    ("backends/etcd/backend.py", "AsyncEtcdBackend.watch_delete"),
    ("backends/etcd/backend.py", "EtcdAttempt.wait"),
    ("backends/etcd/name_watch.py", "EtcdNameWatch.changed"),
    ("backends/etcd/name_watch.py", "EtcdNameWatch._start"),
    ("backends/etcd/http.py", "Gateway.stream"),
    ("backends/etcd/wire.py", "Wire.stream"),
    ("backends/zookeeper/backend.py", "AsyncZooKeeperBackend.close"),
    ("backends/zookeeper/name_watch.py", "ZkNameWatch.changed"),
    ("backends/zookeeper/name_watch.py", "ZkNameWatch._arm"),
    # made only by AsyncZooKeeperBackend._connect, after session() moved onto the loop
    ("backends/zookeeper/session.py", "ZkSession.__init__"),
    # a waiter's watch, made on the loop (ZooKeeperAttempt.wait runs through run())
    ("backends/zookeeper/session.py", "Watch.__init__"),
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


def _functions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function in ``tree`` with its qualified name (Class.method, outer.inner)."""
    found: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                found.append((prefix + child.name, child))
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def unmoved_calls(source: str, relative: str) -> list[str]:
    """Where ``source`` (the module at ``relative``, under src/fencelock) needs a running
    loop before its function moved onto one."""
    problems = []
    for name, function in _functions(ast.parse(source, relative)):
        if (relative, name) in ON_THE_LOOP_ONLY:
            continue
        for call in _own_calls(function):
            called = _called_name(call)
            if called in MOVES_ONTO_THE_LOOP:
                break
            needs = called in NEEDS_A_LOOP or called in NEEDS_A_LOOP_TOO
            if needs and not (called == "sleep" and _is_sleep_zero(call)):
                problems.append(f"{relative}:{call.lineno} {name}(): {called}")
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
    assert off_the_loop_packages() == [SRC / "backends" / "etcd", SRC / "backends" / "zookeeper"]


@pytest.mark.parametrize("package", off_the_loop_packages(), ids=lambda p: p.name)
def test_what_needs_a_loop_moves_onto_it_first(package: Path) -> None:
    problems = [
        problem
        for path in sorted(package.glob("*.py"))
        for problem in unmoved_calls(path.read_text(), path.relative_to(SRC).as_posix())
    ]
    assert not problems, "needs a running loop before blocking_call.onto_the_loop():\n" + "\n".join(
        problems
    )


def test_the_check_finds_a_call_before_the_move_and_none_after_it() -> None:
    sample = (
        "import asyncio\n"
        "async def moved():\n"
        "    await blocking_call.onto_the_loop()\n"
        "    asyncio.get_running_loop()\n"
        "async def unmoved():\n"
        "    await asyncio.sleep(0)\n"
        "    await asyncio.sleep(1)\n"
        "class Client:\n"
        "    async def task_body(self):\n"
        "        await asyncio.sleep(1)\n"
    )
    assert unmoved_calls(sample, "sample.py") == [
        "sample.py:7 unmoved(): sleep",
        "sample.py:10 Client.task_body(): sleep",
    ]


def test_every_function_said_to_run_on_the_loop_only_exists() -> None:
    defined = {
        (path.relative_to(SRC).as_posix(), name)
        for package in off_the_loop_packages()
        for path in package.glob("*.py")
        for name, _ in _functions(ast.parse(path.read_text()))
    }
    assert defined >= ON_THE_LOOP_ONLY
