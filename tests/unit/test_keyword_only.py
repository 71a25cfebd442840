"""Arguments that can be swapped without mypy noticing are named: no function or
dataclass in src/ takes more than three positional parameters of one type side by side
(``*`` in signatures, ``kw_only=True`` on dataclasses)."""

from __future__ import annotations

import ast
from pathlib import Path

import fencelock

SRC = Path(fencelock.__file__).parent
MOST_SIDE_BY_SIDE = 3


def _runs(annotations: list[str]) -> int:
    """The longest run of equal annotations, side by side."""
    longest, run, previous = 0, 0, None
    for annotation in annotations:
        run = run + 1 if annotation == previous else 1
        previous = annotation
        longest = max(longest, run)
    return longest


def _positional_annotations(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    arguments = [*function.args.posonlyargs, *function.args.args]
    return [ast.unparse(a.annotation) for a in arguments if a.annotation is not None]


def _is_positional_dataclass(node: ast.ClassDef) -> bool:
    for decorator in node.decorator_list:
        call = decorator if isinstance(decorator, ast.Call) else None
        name = ast.unparse(call.func if call else decorator)
        if name.split(".")[-1] == "dataclass":
            return not any(
                k.arg == "kw_only" and ast.unparse(k.value) == "True"
                for k in (call.keywords if call else [])
            )
    return False


def _dataclass_fields(node: ast.ClassDef) -> list[str]:
    return [
        ast.unparse(item.annotation)
        for item in node.body
        if isinstance(item, ast.AnnAssign) and "ClassVar" not in ast.unparse(item.annotation)
    ]


def wide(source: str, relative: str) -> list[str]:
    """Where ``source`` takes more than three positional parameters of one type in a row."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            annotations = _positional_annotations(node)
        elif isinstance(node, ast.ClassDef) and _is_positional_dataclass(node):
            annotations = _dataclass_fields(node)
        else:
            continue
        if _runs(annotations) > MOST_SIDE_BY_SIDE:
            found.append(f"{relative}:{node.lineno} {node.name}")
    return found


def test_no_function_or_dataclass_takes_four_of_a_kind_by_position() -> None:
    found = [
        problem
        for path in sorted(SRC.rglob("*.py"))
        for problem in wide(path.read_text(), path.relative_to(SRC).as_posix())
    ]
    assert not found, "name these parameters (keyword-only):\n" + "\n".join(found)


def test_the_check_sees_a_wide_signature_and_a_wide_dataclass() -> None:
    sample = (
        "def f(a: float, b: float, c: float, d: float) -> None: ...\n"
        "def g(a: float, b: float, c: float, *, d: float) -> None: ...\n"
        "@dataclass(frozen=True)\n"
        "class T:\n    a: int\n    b: int\n    c: int\n    d: int\n"
        "@dataclass(frozen=True, kw_only=True)\n"
        "class U:\n    a: int\n    b: int\n    c: int\n    d: int\n"
    )
    assert wide(sample, "s.py") == ["s.py:1 f", "s.py:4 T"]
