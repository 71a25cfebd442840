"""Lock-name rules.

A name is 1 to 200 characters of ASCII letters, digits and ``- _ . : @ = +``,
with ``/`` separating the parts of a hierarchy (``orders/99999``). A part may
not be empty, ``.`` or ``..``, so a name maps one to one onto a key, a row or a
ZooKeeper path on every backend.
"""

from __future__ import annotations

import re

from fencelock.errors import ConfigError

MAX_NAME_LENGTH = 200
_PART = re.compile(r"[A-Za-z0-9_.:@=+-]+")


def validate_name(name: object) -> str:
    """Return ``name`` if it is a valid lock name, else raise ConfigError saying why."""
    if not isinstance(name, str):
        raise ConfigError(f"lock name must be a str, not {type(name).__name__}")
    if not name:
        raise ConfigError("lock name is empty")
    if len(name) > MAX_NAME_LENGTH:
        raise ConfigError(
            f"lock name is {len(name)} characters long; the limit is {MAX_NAME_LENGTH}"
        )
    for part in name.split("/"):
        if not part:
            raise ConfigError(
                f"lock name {name!r} has an empty part: no leading, trailing or double '/'"
            )
        if part in (".", ".."):
            raise ConfigError(f"lock name {name!r} has a '{part}' part")
        if not _PART.fullmatch(part):
            bad = next(ch for ch in part if not _PART.fullmatch(ch))
            raise ConfigError(
                f"lock name {name!r} contains {bad!r}; allowed are letters, digits, "
                "'-_.:@=+' and '/' between parts"
            )
    return name


def validate_prefix(prefix: str) -> str:
    """A prefix for listing: empty, or a valid name optionally ending in '/'."""
    if prefix == "":
        return prefix
    validate_name(prefix.rstrip("/") or "/")
    return prefix
