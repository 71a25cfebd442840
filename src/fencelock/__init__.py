"""fencelock: distributed locks that stay correct when processes pause.

import fencelock

with fencelock.connect() as client:
    with client.lock("orders/99999") as lease:
        lease.token       # strictly greater than every earlier token for the name
        lease.check()     # raises LeaseLost if the lease can no longer be trusted
"""

import importlib
import logging
import typing

from fencelock.backends.base import LockInfo
from fencelock.client import AsyncClient, Client, aconnect, connect, default_url
from fencelock.errors import (
    AcquireCancelled,
    AlreadyHeld,
    BackendUnavailable,
    ConfigError,
    FencelockError,
    LeaseLost,
    LockTimeout,
    NotHolder,
    Skipped,
    StaleToken,
)
from fencelock.lease import AsyncLease, Lease
from fencelock.once import SKIPPED, once
from fencelock.primitives.lock import AsyncLock, Lock

# The rest of the family is imported on first use (PEP 562): most programs take plain locks.
_LAZY = {
    "AsyncBarrier": "barrier",
    "AsyncDoubleBarrier": "barrier",
    "Barrier": "barrier",
    "DoubleBarrier": "barrier",
    "AsyncElection": "election",
    "AsyncLeadership": "election",
    "Election": "election",
    "Leader": "election",
    "Leadership": "election",
    "AsyncGroup": "group",
    "AsyncMembership": "group",
    "Group": "group",
    "GroupChange": "group",
    "Member": "group",
    "Membership": "group",
    "AsyncLatch": "latch",
    "Latch": "latch",
    "AsyncMultiLease": "multi",
    "AsyncMultiLock": "multi",
    "MultiLease": "multi",
    "MultiLock": "multi",
    "AsyncRWLease": "rwlock",
    "AsyncRWLock": "rwlock",
    "RWLease": "rwlock",
    "RWLock": "rwlock",
    "AsyncPermit": "semaphore",
    "AsyncSemaphore": "semaphore",
    "Permit": "semaphore",
    "Semaphore": "semaphore",
}

if typing.TYPE_CHECKING:
    from fencelock.primitives.barrier import (
        AsyncBarrier,
        AsyncDoubleBarrier,
        Barrier,
        DoubleBarrier,
    )
    from fencelock.primitives.election import (
        AsyncElection,
        AsyncLeadership,
        Election,
        Leader,
        Leadership,
    )
    from fencelock.primitives.group import (
        AsyncGroup,
        AsyncMembership,
        Group,
        GroupChange,
        Member,
        Membership,
    )
    from fencelock.primitives.latch import AsyncLatch, Latch
    from fencelock.primitives.multi import AsyncMultiLease, AsyncMultiLock, MultiLease, MultiLock
    from fencelock.primitives.rwlock import AsyncRWLease, AsyncRWLock, RWLease, RWLock
    from fencelock.primitives.semaphore import AsyncPermit, AsyncSemaphore, Permit, Semaphore


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fencelock' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"fencelock.primitives.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__version__ = "0.1.0"

# A library stays quiet unless the application configures logging.
logging.getLogger("fencelock").addHandler(logging.NullHandler())

__all__ = [
    "SKIPPED",
    "AcquireCancelled",
    "AlreadyHeld",
    "AsyncBarrier",
    "AsyncClient",
    "AsyncDoubleBarrier",
    "AsyncElection",
    "AsyncGroup",
    "AsyncLatch",
    "AsyncLeadership",
    "AsyncLease",
    "AsyncLock",
    "AsyncMembership",
    "AsyncMultiLease",
    "AsyncMultiLock",
    "AsyncPermit",
    "AsyncRWLease",
    "AsyncRWLock",
    "AsyncSemaphore",
    "BackendUnavailable",
    "Barrier",
    "Client",
    "ConfigError",
    "DoubleBarrier",
    "Election",
    "FencelockError",
    "Group",
    "GroupChange",
    "Latch",
    "Leader",
    "Leadership",
    "Lease",
    "LeaseLost",
    "Lock",
    "LockInfo",
    "LockTimeout",
    "Member",
    "Membership",
    "MultiLease",
    "MultiLock",
    "NotHolder",
    "Permit",
    "RWLease",
    "RWLock",
    "Semaphore",
    "Skipped",
    "StaleToken",
    "aconnect",
    "connect",
    "default_url",
    "once",
]
