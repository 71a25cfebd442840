"""The holder's description carried in owner values: made, read back, kept short."""

from __future__ import annotations

import os
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

import fencelock
from fencelock import holder
from fencelock.holder import Holder, holder_of, new_identity
from fencelock.primitives.lock import new_owner


def test_an_owner_value_says_which_process_took_it() -> None:
    owner = new_owner()
    assert re.fullmatch(r"[0-9a-f]{40}\.[a-z2-7]+", owner)
    found = holder_of(owner)
    assert found is not None
    assert found.pid == os.getpid()
    assert found.command


def test_a_label_replaces_the_command_line_until_unset() -> None:
    try:
        holder.set_label("nightly-billing")
        labelled = holder_of(new_owner())
        assert labelled is not None
        assert labelled.command == "nightly-billing"
    finally:
        holder.set_label(None)
    unlabelled = holder_of(new_owner())
    assert unlabelled is not None
    assert unlabelled.command != "nightly-billing"


def test_a_label_that_is_not_text_is_refused_in_one_line() -> None:
    with pytest.raises(fencelock.ConfigError, match="holder label must be a string"):
        holder.set_label(42)  # type: ignore[arg-type]
    assert holder_of(new_owner()) is not None  # and nothing changed


# a fork beside threads is what these tests are about (3.12 warns of it)
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_describes_itself_with_its_own_pid() -> None:
    parent = new_owner()
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its first owner value after fork
        os.write(writer, new_owner().encode())
        os._exit(0)
    os.close(writer)
    child = os.read(reader, 1024).decode()
    os.waitpid(pid, 0)
    os.close(reader)
    found_parent, found_child = holder_of(parent), holder_of(child)
    assert found_parent is not None
    assert found_child is not None
    assert (found_parent.pid, found_child.pid) == (os.getpid(), pid)


def test_long_commands_are_shortened_and_the_value_fits_the_sql_columns() -> None:
    try:
        holder.set_label("é" * 500)
        owner = new_owner()
    finally:
        holder.set_label(None)
    found = holder_of(owner)
    assert found is not None
    assert len(found.command.encode()) <= holder.COMMAND_BYTES
    assert len(owner) <= 400  # mysql's OWNER_WIDTH


def test_a_retry_keeps_the_description_with_new_random_digits() -> None:
    owner = new_owner()
    again = new_identity(owner)
    assert again[:40] != owner[:40]
    assert again[41:] == owner[41:]


def test_values_without_a_description_have_no_holder() -> None:
    assert holder_of(None) is None
    assert holder_of("ab" * 20) is None  # an older client's owner
    assert holder_of("ab" * 20 + ".not-base32!") is None
    assert holder_of("ab" * 20 + ".mfrgg") is None  # base32, but not four fields


@given(
    host=st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=30),
    pid=st.integers(1, 2**22),
    started=st.one_of(st.none(), st.integers(0, 2**33).map(float)),
    command=st.text(st.characters(blacklist_categories=["Cs"]), max_size=30),
)
def test_descriptions_read_back_as_written(
    host: str, pid: int, started: float | None, command: str
) -> None:
    written = Holder(host.replace("\x1f", " "), pid, started, command.replace("\x1f", " "))
    assert holder_of(f"{'0' * 40}.{holder._encode(written)}") == written


@pytest.mark.parametrize(
    ("argv", "program"),
    [
        (
            ["python3", "job.py", "--token=abc123SECRET", "--db-password", "hunter2"],
            "python3 job.py",
        ),
        (["/usr/bin/python3.11", "-X", "dev", "/srv/app/report.py", "pw"], "python3.11 report.py"),
        (["python3", "-m", "celery", "-A", "app", "worker"], "python3 -m celery"),
        (["python3", "-c", "print('secret')"], "python3 -c"),
        (["sh", "-c", "curl -u user:secret https://x"], "sh -c"),
        (["/usr/bin/rsync", "-a", "--password-file=/p", "src", "dst"], "rsync"),
        (["python3", "--", "job.py", "--token=x"], "python3 job.py"),
        (["python3"], "python3"),
    ],
)
def test_a_program_is_recorded_without_its_arguments(argv: list[str], program: str) -> None:
    assert holder.program_of(argv) == program


def test_set_program_names_a_commands_program_and_a_label_masks_url_passwords() -> None:
    try:
        holder.set_program(["python3", "job.py", "--token=abc123SECRET"])
        ran = holder_of(new_owner())
        assert ran is not None
        assert ran.command == "python3 job.py"
        holder.set_label("billing via postgresql://app:TopS3cretPW@db/prod")
        labelled = holder_of(new_owner())
        assert labelled is not None
        assert labelled.command == "billing via postgresql://app:***@db/prod"
    finally:
        holder.set_label(None)
        holder.set_program(None)
    assert "abc123SECRET" not in repr(holder_of(new_owner()))
