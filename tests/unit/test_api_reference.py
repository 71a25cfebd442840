"""The API reference shows every public name and every public member of it.

For each name in ``fencelock.__all__`` (and each public class or function of the three
``fencelock.compat`` faces), the built reference pages must carry the anchor mkdocstrings
gives it (``id="fencelock.Lease"``) and one for each public member, inherited ones
included (``id="fencelock.Lease.token"``): what the README uses must be findable.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Iterator

import pytest

import fencelock
from tests import docs_build

COMPAT = ("fencelock.compat.redis_py", "fencelock.compat.redis_lock", "fencelock.compat.pottery")


@pytest.fixture(scope="module")
def anchors(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    pytest.importorskip("mkdocs", reason="mkdocs is not installed (pip install -e '.[docs]')")
    pytest.importorskip("mkdocstrings", reason="mkdocstrings is not installed")
    site = docs_build.built_site(tmp_path_factory)
    found: set[str] = set()
    for page in (site / "reference").rglob("*.html"):
        found.update(re.findall(r'\bid="([^"]+)"', page.read_text()))
    return found


def _defined_in_fencelock(cls: type, member: str) -> bool:
    """Whether the class in ``cls``'s MRO that defines ``member`` is fencelock's own."""
    for klass in cls.__mro__:
        if member in vars(klass):
            return klass.__module__.split(".")[0] == "fencelock"
    return False


def _public(module: str) -> Iterator[tuple[str, object]]:
    """A compat face's public classes and functions (those it defines)."""
    face = importlib.import_module(module)
    for name, value in vars(face).items():
        if name.startswith("_") or not (inspect.isclass(value) or inspect.isfunction(value)):
            continue
        if getattr(value, "__module__", None) == module:
            yield f"{module}.{name}", value


def _documented() -> Iterator[tuple[str, object]]:
    for name in fencelock.__all__:
        yield f"fencelock.{name}", getattr(fencelock, name)
    for module in COMPAT:
        yield from _public(module)


def _paths(public: str, value: object) -> list[str]:
    """The dotted paths under which the reference may show ``value``."""
    paths = [public]
    qualname = getattr(value, "__qualname__", None)
    module = getattr(value, "__module__", None)
    if (inspect.isclass(value) or inspect.isfunction(value)) and qualname and module:
        paths.append(f"{module}.{qualname}")
    return paths


def _missing(anchors: set[str]) -> list[str]:
    missing = []
    for public, value in _documented():
        paths = _paths(public, value)
        if not any(path in anchors for path in paths):
            missing.append(public)
        if not inspect.isclass(value):
            continue
        for member in sorted(dir(value)):
            if member.startswith("_") or not _defined_in_fencelock(value, member):
                continue
            if not any(f"{path}.{member}" in anchors for path in paths):
                missing.append(f"{public}.{member}")
    return missing


def test_every_public_name_and_member_is_in_the_api_reference(anchors: set[str]) -> None:
    missing = _missing(anchors)
    assert not missing, f"{len(missing)} public names missing from docs/reference: {missing}"


def test_the_reference_shows_no_class_twice(anchors: set[str]) -> None:
    """A class is documented once: under its public path, not also under its module's."""
    twice = [
        paths
        for public, value in _documented()
        if inspect.isclass(value)
        and len(set(paths := _paths(public, value))) > 1
        and all(path in anchors for path in paths)
    ]
    assert not twice, f"documented twice: {twice}"


def _constant_defaults() -> Iterator[tuple[str, str, object, str]]:
    """(function, parameter, value, docstring) for each documented callable whose default
    is a named constant (``ttl: float = DEFAULT_TTL``): the reference shows the name only."""
    for public, value in _documented():
        callables = [(public, value)]
        if inspect.isclass(value):
            callables += [
                (f"{public}.{name}", member)
                for name, member in vars(value).items()
                if name[0] != "_"
            ]
            callables.append((public, value.__init__))
        for where, function in callables:
            if not inspect.isfunction(function) or function.__name__ not in (
                "__init__",
                where.rsplit(".", 1)[-1],
            ):
                continue
            module = inspect.getmodule(function)
            if module is None or not module.__name__.startswith("fencelock"):
                continue
            try:
                source = inspect.getsource(function)
            except OSError:  # made at run time (a dataclass's __init__): no named default
                continue
            for parameter in inspect.signature(function).parameters.values():
                match = re.search(rf"\b{parameter.name}: [^=,]+= (_?[A-Z][A-Z0-9_]+)\b", source)
                if match:
                    doc = inspect.getdoc(value if function.__name__ == "__init__" else function)
                    yield where, parameter.name, parameter.default, doc or ""


def test_a_default_given_by_a_constant_is_stated_in_the_docstring() -> None:
    unstated = [
        (where, parameter, default)
        for where, parameter, default, doc in _constant_defaults()
        if not re.search(rf"``{parameter}``[^.;]*?\bdefaults?( to)? {default:g}\b", doc)
    ]
    assert not unstated, f"defaults the reference would show only as a name: {unstated}"
