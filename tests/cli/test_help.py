"""Every command's --help reads as text: no reStructuredText markup, every choice explained."""

from __future__ import annotations

import pytest

from fencelock.check.workloads import WORKLOADS
from fencelock.cli import _COMMANDS

from .conftest import fencelock_cmd


@pytest.mark.parametrize("command", sorted(_COMMANDS))
def test_help_shows_no_markup(env: dict[str, str], command: str) -> None:
    done = fencelock_cmd(env, command, "--help")
    assert done.returncode == 0, done.stderr
    assert "``" not in done.stdout
    assert ":class:" not in done.stdout
    assert ":func:" not in done.stdout


def test_check_help_explains_every_workload(env: dict[str, str]) -> None:
    shown = " ".join(fencelock_cmd(env, "check", "--help").stdout.split())
    for workload in WORKLOADS:
        assert f"{workload}: " in shown, workload
