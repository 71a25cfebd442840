"""The registry of bugs the simulator can put back: each a patch of the code under test
that a module of :mod:`fencelock.sim` registers (``--bug NAME`` names one). The library
itself reads no switch: a test fails if any module outside ``fencelock.sim`` names one.
Import :mod:`fencelock.sim.bugs` for the registry with every bug in it."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from fencelock.errors import ConfigError

# Each bug's name, and what it was.
KNOWN: dict[str, str] = {}

_putting_back: dict[str, Callable[[], contextlib.AbstractContextManager[None]]] = {}


def put_back_by(
    bug: str, description: str, context: Callable[[], contextlib.AbstractContextManager[None]]
) -> None:
    """``context()`` puts ``bug`` (what ``description`` says) back while it is entered."""
    KNOWN[bug] = description
    _putting_back[bug] = context


@contextlib.contextmanager
def reintroduced(*bugs: str) -> Iterator[None]:
    """Within: ``bugs`` are back."""
    unknown = set(bugs) - set(KNOWN)
    if unknown:
        raise ConfigError(f"no such historical bug: {', '.join(sorted(unknown))}")
    with contextlib.ExitStack() as stack:
        for bug in dict.fromkeys(bugs):
            stack.enter_context(_putting_back[bug]())
        yield


@contextlib.contextmanager
def patched(owner: object, name: str, replacement: object) -> Iterator[None]:
    """``owner.name`` is ``replacement`` within (a module's or a class's own attribute,
    or one the class inherits, which it then has of its own only within)."""
    own = vars(owner)
    missing = object()
    fixed = own.get(name, missing)
    if fixed is missing:
        getattr(owner, name)  # an AttributeError for a name nothing has
    setattr(owner, name, replacement)
    try:
        yield
    finally:
        if fixed is missing:
            delattr(owner, name)
        else:
            setattr(owner, name, fixed)
