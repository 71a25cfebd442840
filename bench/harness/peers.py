"""The peer libraries a benchmark compares with: which can be imported, and their versions."""

from __future__ import annotations

import importlib
import importlib.metadata
import sys
from typing import Any

INSTALL_HINT = ".venv/bin/pip install -e '.[bench]'"


def say(message: str) -> None:
    """A progress line, on stderr (stdout carries the results)."""
    print(message, file=sys.stderr, flush=True)


def optional(module: str, hint: str = INSTALL_HINT) -> Any:
    """The module, or None after saying that the rows needing it are skipped."""
    try:
        return importlib.import_module(module)
    except Exception as exc:  # an import can fail in other ways than ImportError
        say(
            f"note: {module!r} cannot be imported, so the rows that need it are skipped: "
            f"{type(exc).__name__}: {exc} (install the bench extra: {hint})"
        )
        return None


def peer_versions(peers: dict[str, str], hint: str = INSTALL_HINT) -> dict[str, str | None]:
    """Each peer distribution's installed version (``peers``: distribution -> module), or
    None if its module cannot be imported ("stdlib" for a module with no distribution)."""
    found: dict[str, str | None] = {}
    for distribution, module in peers.items():
        if optional(module, hint) is None:
            found[distribution] = None
            continue
        try:
            found[distribution] = importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            found[distribution] = "stdlib" if module in sys.stdlib_module_names else "unknown"
    return found


def version(distribution: str) -> str | None:
    """An installed distribution's version, or None."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
