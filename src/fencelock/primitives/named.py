"""What the primitives named with a TTL of their own (an election, a group) share: the
name and TTL, checked, and how they show."""

from __future__ import annotations

from fencelock.engine.names import validate_name
from fencelock.engine.timing import validate_ttl


class Named:
    """A primitive's name and its leases' TTL (both checked: :class:`ConfigError`)."""

    def __init__(self, name: str, ttl: float) -> None:
        self.name = validate_name(name)
        self.ttl = validate_ttl(ttl)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} ttl={self.ttl}>"
