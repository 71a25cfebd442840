"""Group membership's helpers: :func:`assign` splits work among the live members.

``client.group(name)`` is the group itself (:class:`~fencelock.primitives.group.Group`).
"""

from __future__ import annotations

from fencelock.primitives.group import GroupChange, Member, assign

__all__ = ["GroupChange", "Member", "assign"]
