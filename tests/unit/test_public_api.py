from __future__ import annotations

import types

import fencelock


def test_all_is_sorted_and_complete() -> None:
    public = sorted(
        name
        for name, value in vars(fencelock).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and name != "annotations"
    )
    assert fencelock.__all__ == sorted(fencelock.__all__)
    assert public == fencelock.__all__


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
        for member, value in vars(obj).items():
            function = value.fget if isinstance(value, property) else value
            if not member.startswith("_") and callable(function) and not function.__doc__:
                missing.append(f"{name}.{member}")
    assert missing == []
