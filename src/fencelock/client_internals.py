"""What primitives use of a client beyond its public methods (``client.internals``).

A primitive uses the client's public methods (``lock``, ``list``, ``evict``…) and,
through it only, the two things no public method gives: the backend the client
talks to (its capabilities and attempts) and the holdings that track, renew and
re-enter the leases taken through the client. No module but ``client.py`` reads a
client's private attributes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from fencelock.backends.base import AsyncBackend, Backend
from fencelock.client_leases import Holdings
from fencelock.lease import LeaseBase

B = TypeVar("B", Backend, AsyncBackend)
L = TypeVar("L", bound=LeaseBase)


@dataclass(frozen=True)
class ClientInternals(Generic[B, L]):
    """A client's backend and holdings, for the primitives built on it."""

    backend: B
    holdings: Holdings[L]
