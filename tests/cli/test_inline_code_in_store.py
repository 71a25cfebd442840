"""``fencelock run -- perl -e CODE``: the lock store records ``perl -e``, never CODE
(base32 inside the owner value, where ``strings`` would not see it), and no output of
status, list or top shows it. Each interpreter found on this machine is tried."""

from __future__ import annotations

import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from fencelock.holder import holder_of
from tests.polling import wait_until

from .conftest import FENCELOCK, fencelock_cmd

CODE = "TopS3cretCODE"
OWNER = re.compile(r"[0-9a-f]{40}\.[a-z2-7]+")
PYTHON = os.path.basename(sys.executable)

INLINE = [
    (["perl", "-e", f"sleep 60; # {CODE}"], "perl -e"),
    (["perl", "-lne", f"print if /{CODE}/"], "perl -lne"),
    (["node", "-e", f"setTimeout(() => {{}}, 60000) // {CODE}"], "node -e"),
    (["node", "--eval", f"setTimeout(() => {{}}, 60000) // {CODE}"], "node --eval"),
    (["node", "-p", f"setTimeout(() => {{}}, 60000) && 0 // {CODE}"], "node -p"),
    (["ruby", "-e", f"sleep 60 # {CODE}"], "ruby -e"),
    (["php", "-r", f"sleep(60); // {CODE}"], "php -r"),
    (["sh", "-c", f"sleep 60 # {CODE}"], "sh -c"),
    (["bash", "-ec", f"sleep 60 # {CODE}"], "bash -ec"),
    ([sys.executable, "-Sc", f"import time; time.sleep(60)  # {CODE}"], f"{PYTHON} -Sc"),
]


def _stored_commands(db: Path) -> list[str]:
    """Every holder command in the SQLite file, decoded from the owner values."""
    with sqlite3.connect(db) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        raw = repr([row for t in tables for row in conn.execute(f"SELECT * FROM {t}")])  # noqa: S608 (the table names the database listed)
    assert CODE not in raw
    return [h.command for owner in OWNER.findall(raw) if (h := holder_of(owner))]


@pytest.mark.parametrize(("argv", "recorded"), INLINE, ids=[recorded for _, recorded in INLINE])
def test_inline_code_never_reaches_the_store_nor_any_output(
    env: dict[str, str], argv: list[str], recorded: str
) -> None:
    if shutil.which(argv[0]) is None:
        pytest.skip(f"no {argv[0]} here")
    db = Path(env["FENCELOCK_URL"].removeprefix("sqlite:///"))
    runner = subprocess.Popen(
        [FENCELOCK, "run", "code/job", "--", *argv],
        env=env,
        stdin=subprocess.PIPE,  # perl -lne reads it: open until the end
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:

        def held() -> subprocess.CompletedProcess[str] | None:
            assert runner.poll() is None, runner.communicate()
            done = fencelock_cmd(env, "status", "code/job")
            return done if "held by" in done.stdout else None

        status = wait_until(held, what="code/job held", interval=0.05)
        outputs = [status] + [
            fencelock_cmd(env, *args)
            for args in (["status", "--json", "code/job"], ["list", "--json"], ["top", "--once"])
        ]
        stored = _stored_commands(db)
    finally:
        runner.send_signal(signal.SIGTERM)
        out, err = runner.communicate(timeout=30)
    assert f"'{recorded}'" in status.stdout, status.stdout
    assert stored
    assert set(stored) == {recorded}
    for done in outputs:
        assert done.returncode == 0, done.stderr
        assert CODE not in done.stdout + done.stderr, done.args
    assert CODE.encode() not in out + err
