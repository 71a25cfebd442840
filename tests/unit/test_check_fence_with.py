"""``fencelock check --fence-with``: which fence checks the resource, said clearly when a
run cannot be made."""

from __future__ import annotations

import pytest

from fencelock.check.options import CheckOptions, validate
from fencelock.errors import ConfigError


def test_the_guard_and_the_sqlalchemy_fence_are_taken() -> None:
    validate(CheckOptions(fence_with="guard"))
    validate(CheckOptions(fence_with="sqlalchemy"))


def test_another_fence_is_named_with_the_choices() -> None:
    with pytest.raises(ConfigError, match=r"--fence-with must be one of guard, sqlalchemy"):
        validate(CheckOptions(fence_with="django"))


def test_the_sqlalchemy_fence_without_fencing_contradicts_itself() -> None:
    with pytest.raises(ConfigError, match="contradict"):
        validate(CheckOptions(fence_with="sqlalchemy", fencing=False))
