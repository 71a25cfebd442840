from __future__ import annotations

import importlib
import types

import pytest

import fencelock


def test_all_is_sorted_and_complete() -> None:
    public = sorted(
        name
        for name in dir(fencelock)  # the primitives beyond Lock load on first use
        if not name.startswith("_")
        and not isinstance(getattr(fencelock, name), types.ModuleType)
        and name != "annotations"
    )
    # constants first, then the rest, as ruff sorts it (RUF022)
    assert fencelock.__all__ == sorted(fencelock.__all__, key=lambda n: (not n.isupper(), n))
    assert public == sorted(fencelock.__all__)


def test_every_error_is_a_fencelock_error() -> None:
    for name in fencelock.__all__:
        obj = getattr(fencelock, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, fencelock.FencelockError)


def test_every_public_member_has_a_docstring() -> None:
    missing = []
    for name in fencelock.__all__:
        obj = getattr(fencelock, name)
        if not isinstance(obj, type):
            if callable(obj) and not obj.__doc__:
                missing.append(name)
            continue
        if not obj.__doc__:
            missing.append(name)
        for member, value in _members(obj).items():
            function = value.fget if isinstance(value, property) else value
            if not member.startswith("_") and callable(function) and not function.__doc__:
                missing.append(f"{name}.{member}")
    assert missing == []


# The modules whose classes users get from the client (a semaphore, a leadership, a
# guard) without importing them: every public class and method documents itself too.
HANDED_OUT = [
    "fencelock.client",
    "fencelock.lease",
    "fencelock.run_once",
    "fencelock.fencing",
    *(
        f"fencelock.primitives.{name}"
        for name in ("lock", "semaphore", "rwlock", "multi", "latch", "election", "blocks")
    ),
]


@pytest.mark.parametrize("module_name", HANDED_OUT)
def test_every_class_users_are_handed_documents_itself(module_name: str) -> None:
    module = importlib.import_module(module_name)
    missing = []
    for name, cls in vars(module).items():
        if name.startswith("_") or not isinstance(cls, type) or cls.__module__ != module_name:
            continue
        if not cls.__doc__:
            missing.append(name)
        for member, value in vars(cls).items():
            function = value.fget if isinstance(value, property) else value
            function = getattr(function, "__func__", function)  # static and class methods
            if not member.startswith("_") and callable(function) and not function.__doc__:
                missing.append(f"{name}.{member}")
    assert missing == []


def _members(cls: type) -> dict[str, object]:
    """``cls``'s own members and those it inherits from fencelock's classes."""
    members: dict[str, object] = {}
    for klass in reversed(cls.__mro__):
        if klass.__module__.startswith("fencelock"):
            members.update(vars(klass))
    return members


def test_clients_locks_and_leases_keep_their_workings_private() -> None:
    """The backend, renewer, holdings and a lease's state-table moves are internal."""
    with fencelock.connect("memory://public-api") as client:
        lock = client.lock("jobs/1")
        lease = lock.acquire()
        assert _public(client) == {"internals"}  # what primitives use, and only that
        assert _public(lock) == {
            "name",
            "ttl",
            "renew",
            "timeout",
            "fair",
            "max_hold",
            "stop_on_loss",
            "reentrant",
        }
        assert _public(lease) == {
            "name",
            "owner",
            "token",
            "ttl",
            "renews",
            "trusted_until",
            "lost_reason",
            "max_hold",
            "attempts",
            "reentrant",
            "depth",
        }
        lease.release()
    for cls in (fencelock.Lease, fencelock.AsyncLease):
        assert not {"apply", "expired", "schedule_version"} & set(dir(cls))


def _public(obj: object) -> set[str]:
    return {name for name in vars(obj) if not name.startswith("_")}
