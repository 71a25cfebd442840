"""One rule for the whole command: every usage error exits 64 (EX_USAGE), whether the
option parser found it or fencelock did, with one line that names the problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from fencelock.cli import _COMMANDS

from .conftest import fencelock_cmd

# (arguments, words the message must contain): at least one per command
USAGE_ERRORS = [
    (["nosuch"], "No such command"),
    (["--no-such-option"], "No such option"),
    (["check", "--nemesis", "nonsense"], "nonsense"),
    (["demo", "--no-such-option"], "No such option"),
    (["elect", "jobs/e"], "command to run while leader is missing"),
    (["elect", "--grace", "-1", "jobs/e", "--", "true"], "--grace"),
    (["elect", "--ttl", "3", "--grace", "2", "jobs/e", "--", "true"], "does not fit in --ttl 3"),
    (["init", "--sql", "--url", ""], "--sql needs --url"),
    (["init", "--sql", "--url", "memory://"], "keeps no SQL schema"),
    (["list", "--url", "nosuch://x"], "unknown scheme"),
    (["members"], "Missing argument"),
    (["members", "bad name!"], "name"),
    (["members", "--watch", "--interval", "0", "workers"], "--interval must be more than 0"),
    (["members", "--interval", "1", "workers"], "--interval goes with --watch"),
    (["release", "jobs/r"], "--force"),
    (["release", "--force", "jobs/r"], "no terminal: add --yes"),
    (["run", "jobs/r"], "Missing argument"),
    (["run", "--ttl", "0", "jobs/r", "--", "true"], "ttl must be > 0"),
    (["run", "--max-hold", "0", "jobs/r", "--", "true"], "--max-hold"),
    (["run", "--grace", "-1", "jobs/r", "--", "true"], "--grace"),
    (["run", "--grace", "20", "jobs/r", "--", "true"], "--grace 20 does not fit in --ttl 30"),
    (["run", "--wait", "-1", "jobs/r", "--", "true"], "--wait"),
    (["run", "--once", "--no-wait", "jobs/r", "--", "true"], "--once excludes --no-wait"),
    (["run", "--once", "--wait", "5", "jobs/r", "--", "true"], "--wait excludes"),
    (["run", "bad name!", "--", "true"], "name"),
    (["stats"], "metrics address"),
    (["status"], "Missing argument"),
    (["status", "--url", "redis://:x@h:notaport/0", "a"], "port"),
    (["top", "--interval", "0.01"], "--interval must be at least"),
]


def test_every_command_has_a_usage_error_case() -> None:
    covered = {args[0] for args, _ in USAGE_ERRORS}
    assert set(_COMMANDS) <= covered


@pytest.mark.parametrize(
    ("args", "words"), USAGE_ERRORS, ids=[" ".join(a) for a, _ in USAGE_ERRORS]
)
def test_usage_error_exits_64(env: dict[str, str], args: list[str], words: str) -> None:
    done = fencelock_cmd(env, *args)
    assert done.returncode == 64, (done.returncode, done.stderr)
    assert words in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("fencelock: "), done.stderr


@pytest.mark.parametrize(
    ("typed", "meant"), [("stauts", "'status'"), ("lst", "'list'"), ("realese", "'release'")]
)
def test_a_mistyped_command_gets_a_suggestion(env: dict[str, str], typed: str, meant: str) -> None:
    done = fencelock_cmd(env, typed, "x")
    assert done.returncode == 64
    assert f"No such command '{typed}'; did you mean" in done.stderr
    assert meant in done.stderr
    assert "(see 'fencelock --help')" in done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["status", "x"],
        ["list"],
        ["members", "workers"],
        ["top", "--once"],
        ["release", "--force", "--yes", "x"],
    ],
    ids=["status", "list", "members", "top", "release"],
)
def test_a_command_that_looks_never_creates_a_store(
    env: dict[str, str], tmp_path: Path, args: list[str]
) -> None:
    """A mistyped --url to a file that does not exist is said (exit 69), not made empty,
    directories and all, and reported as "never locked"."""
    missing = tmp_path / "typo-dir" / "sub" / "x.db"
    done = fencelock_cmd(env, *args, "--url", f"sqlite:///{missing}")
    assert done.returncode == 69, (done.returncode, done.stderr)
    said = f"no lock store at {missing}: nothing was ever locked there (is --url right?)"
    assert done.stderr == f"fencelock: {said}\n"
    assert not (tmp_path / "typo-dir").exists()


def test_help_and_version_exit_0(env: dict[str, str]) -> None:
    import fencelock

    shown = fencelock_cmd(env, "--help")
    assert shown.returncode == 0
    for name in _COMMANDS:
        assert f"  {name} " in shown.stdout
    version = fencelock_cmd(env, "--version")
    assert version.returncode == 0
    assert fencelock.__version__ in version.stdout


def test_each_command_loads_with_its_summary(env: dict[str, str]) -> None:
    for name in _COMMANDS:
        done = fencelock_cmd(env, name, "--help")
        assert done.returncode == 0, (name, done.stderr)
        assert f"fencelock {name}" in done.stdout
