"""The lock store is read by others: nothing a user passes in argv, nor a URL's
password, reaches it or any output of status, list and top. Read raw, not only
through the CLI: the Redis keys and the SQLite rows, owner values decoded."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import redis

from fencelock.holder import holder_of
from fencelock.testing import ServerPool
from tests.polling import wait_until

from .conftest import FENCELOCK, fencelock_cmd

SECRETS = ("TopS3cretPW", "abc123SECRET", "hunter2")
OWNER = re.compile(rb"[0-9a-f]{40}\.[a-z2-7]+")

JOB = """
import pathlib, sys, time, fencelock
ready, stop, url = pathlib.Path(sys.argv[-3]), pathlib.Path(sys.argv[-2]), sys.argv[-1]
with fencelock.connect(url) as client, client.lock("billing/close", ttl=30):
    ready.touch()
    while not stop.exists():
        time.sleep(0.05)
"""


def _leaks(raw: bytes) -> list[str]:
    """Every secret found in ``raw`` as it is, or in an owner value's decoded holder."""
    found = [s for s in SECRETS if s.encode() in raw]
    for owner in OWNER.findall(raw):
        holder = holder_of(owner.decode())
        assert holder is not None, owner
        found += [s for s in SECRETS if s in repr(holder)]
    return found


def _commands(raw: bytes) -> set[str]:
    return {holder.command for o in OWNER.findall(raw) if (holder := holder_of(o.decode()))}


def test_no_argument_nor_url_password_reaches_the_store_or_any_output(
    tmp_path: Path, env: dict[str, str]
) -> None:
    sqlite_url = env["FENCELOCK_URL"]
    job = tmp_path / "job.py"
    job.write_text(JOB)
    ready, stop = tmp_path / "ready", tmp_path / "stop"
    with ServerPool.under(tmp_path / "servers") as pool:
        server = pool.redis("--requirepass", "TopS3cretPW", name="secret-redis")
        redis_url = f"redis://:TopS3cretPW@127.0.0.1:{server.port}/0"
        secret_args = ["--token=abc123SECRET", "--db-password", "hunter2"]
        runner = subprocess.Popen(
            [FENCELOCK, "run", "--url", redis_url, "sec/job", "--",
             sys.executable, str(job), *secret_args, str(ready), str(stop), sqlite_url],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            wait_until(ready.exists, what=f"{ready} to appear", timeout=60)
            keys = redis.Redis(port=server.port, password="TopS3cretPW")
            raw_redis = b"".join(keys.dump(k) or b"" for k in keys.scan_iter("*"))
            with sqlite3.connect(sqlite_url.removeprefix("sqlite:///")) as db:
                tables = [
                    r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")
                ]
                rows = [row for t in tables for row in db.execute(f"SELECT * FROM {t}")]  # noqa: S608 (the table names the database listed)
            raw_sqlite = repr(rows).encode()
            outputs = [
                fencelock_cmd(env, *args)
                for args in (
                    ["status", "--url", redis_url, "sec/job"],
                    ["status", "--json", "--url", redis_url, "sec/job"],
                    ["list", "--json", "--url", redis_url],
                    ["top", "--once", "--url", redis_url],
                    ["status", "billing/close"],
                    ["list", "--json"],
                    ["top", "--once"],
                )
            ]
        finally:
            stop.touch()
            out, err = runner.communicate(timeout=60)
    assert runner.returncode == 0, err
    assert _commands(raw_redis) == {"python job.py"}  # CMD's program, not fencelock's argv
    assert _commands(raw_sqlite) == {"python job.py"}  # the script, not its arguments
    assert _leaks(raw_redis) == []
    assert _leaks(raw_sqlite) == []
    for done in outputs:
        assert done.returncode == 0, done.stderr
        assert _leaks((done.stdout + done.stderr).encode()) == [], done.args
    assert "python job.py" in outputs[0].stdout
    assert "python job.py" in outputs[4].stdout
    assert _leaks(out + err) == []
