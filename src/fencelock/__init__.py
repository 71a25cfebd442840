"""fencelock: distributed locks that stay correct when processes pause.

import fencelock

with fencelock.connect() as client:
    with client.lock("orders/99999") as lease:
        lease.token       # strictly greater than every earlier token for the name
        lease.check()     # raises LeaseLost if the lease can no longer be trusted
"""

import importlib
import typing

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

# Everything but the errors is imported on first use (PEP 562): `import fencelock` stays
# cheap (no asyncio, no logging) for a program that only catches fencelock's errors or
# imports it before it forks; a client's machinery loads when the first one is made.
_LAZY = {
    "LockInfo": "backends.base",
    "AsyncClient": "client",
    "Client": "client",
    "aconnect": "client",
    "connect": "client",
    "default_url": "client",
    "AsyncLease": "lease",
    "Lease": "lease",
    "SKIPPED": "run_once",
    "once": "run_once",
    "AsyncLock": "primitives.lock",
    "Lock": "primitives.lock",
    "AsyncBarrier": "primitives.barrier",
    "AsyncDoubleBarrier": "primitives.barrier",
    "Barrier": "primitives.barrier",
    "DoubleBarrier": "primitives.barrier",
    "AsyncElection": "primitives.election",
    "AsyncLeadership": "primitives.election",
    "Election": "primitives.election",
    "Leader": "primitives.election",
    "Leadership": "primitives.election",
    "AsyncGroup": "primitives.group",
    "AsyncMembership": "primitives.group",
    "Group": "primitives.group",
    "GroupChange": "primitives.group",
    "Member": "primitives.group",
    "Membership": "primitives.group",
    "AsyncLatch": "primitives.latch",
    "Latch": "primitives.latch",
    "AsyncMultiLease": "primitives.multi",
    "AsyncMultiLock": "primitives.multi",
    "MultiLease": "primitives.multi",
    "MultiLock": "primitives.multi",
    "AsyncRWLease": "primitives.rwlock",
    "AsyncRWLock": "primitives.rwlock",
    "RWLease": "primitives.rwlock",
    "RWLock": "primitives.rwlock",
    "AsyncPermit": "primitives.semaphore",
    "AsyncSemaphore": "primitives.semaphore",
    "Permit": "primitives.semaphore",
    "Semaphore": "primitives.semaphore",
}

if typing.TYPE_CHECKING:
    from fencelock.backends.base import LockInfo
    from fencelock.client import AsyncClient, Client, aconnect, connect, default_url
    from fencelock.lease import AsyncLease, Lease
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
    from fencelock.primitives.lock import AsyncLock, Lock
    from fencelock.primitives.multi import AsyncMultiLease, AsyncMultiLock, MultiLease, MultiLock
    from fencelock.primitives.rwlock import AsyncRWLease, AsyncRWLock, RWLease, RWLock
    from fencelock.primitives.semaphore import AsyncPermit, AsyncSemaphore, Permit, Semaphore
    from fencelock.run_once import SKIPPED, once


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fencelock' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"fencelock.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__version__ = "0.1.0"


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
