"""``fencelock release --force NAME``: an operator ends a stuck holder's lease."""

from __future__ import annotations

import os
import pty
import subprocess
from pathlib import Path

from tests.cli.conftest import FENCELOCK, fencelock_cmd
from tests.polling import wait_until


def _wait_held(env: dict[str, str], name: str) -> None:
    wait_until(
        lambda: "held by" in fencelock_cmd(env, "status", name).stdout,
        what=f"{name} taken",
        interval=0.05,
    )


def test_force_release_evicts_the_holder_and_its_command_stops(env: dict[str, str]) -> None:
    runner = subprocess.Popen(
        [FENCELOCK, "run", "--ttl", "1", "jobs/stuck", "--", "sleep", "60"],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_held(env, "jobs/stuck")
        refused = _answered_on_a_terminal(env, "n", "release", "--force", "jobs/stuck")
        assert refused.returncode == 1
        assert "Evict this holder?" in refused.stderr
        assert "jobs/stuck: not evicted" in refused.stderr
        assert "held by" in fencelock_cmd(env, "status", "jobs/stuck").stdout  # untouched
        done = fencelock_cmd(env, "release", "--force", "--yes", "jobs/stuck")
        assert done.returncode == 0, done.stderr
        assert "evicted" in done.stdout
        assert "(token 1)" in done.stdout
        assert "the last token is now 2" in done.stdout
        _, stderr = runner.communicate(timeout=30)
        assert runner.returncode == 76  # the holder heard of it and stopped its command
        assert "lost while the command ran" in stderr
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait(10)


def test_release_needs_force_and_a_free_name_is_left_alone(env: dict[str, str]) -> None:
    plain = fencelock_cmd(env, "release", "jobs/free")
    assert plain.returncode == 64
    assert "--force" in plain.stderr
    free = fencelock_cmd(env, "release", "--force", "-y", "jobs/free")
    assert free.returncode == 0
    assert "nothing to release" in free.stdout


def _answered_on_a_terminal(
    env: dict[str, str], answer: str, *args: str
) -> subprocess.CompletedProcess[str]:
    """``fencelock ARGS`` with a terminal as its standard input, ``answer`` typed there."""
    leader, follower = pty.openpty()
    try:
        os.write(leader, (answer + "\n").encode())
        return subprocess.run(
            [FENCELOCK, *args],
            env=env,
            stdin=follower,
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
    finally:
        os.close(leader)
        os.close(follower)


def test_a_queued_waiter_takes_the_evicted_lock_and_the_output_says_so(
    env: dict[str, str], tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    holder = subprocess.Popen(
        [FENCELOCK, "run", "--ttl", "30", "jobs/queued", "--", "sleep", "60"],
        env=env, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    waiter = None
    try:
        _wait_held(env, "jobs/queued")
        waiter = subprocess.Popen(
            [FENCELOCK, "run", "--wait", "60", "jobs/queued", "--",
             "sh", "-c", f'echo "$FENCELOCK_TOKEN" > {token_file}; sleep 1'],
            env=env, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        wait_until(
            lambda: "1 waiting" in fencelock_cmd(env, "status", "jobs/queued").stdout,
            what="the waiter queued",
            interval=0.05,
        )
        done = fencelock_cmd(env, "release", "--force", "--yes", "jobs/queued")
        assert done.returncode == 0, done.stderr
        assert "evicted" in done.stdout, done.stdout
        assert "(token 1)" in done.stdout, done.stdout
        assert waiter.wait(timeout=60) == 0
        taken = int(token_file.read_text())
        # Either the waiter had taken NAME when fencelock looked (then it names it and its
        # token), or not yet (then the waiter's token is greater than the last one printed).
        if "now held by" in done.stdout:
            assert taken == int(done.stdout.rsplit("(token ", 1)[1].rstrip(")\n")) == 2
        else:
            last = int(done.stdout.split("the last token is now ")[1].split(";")[0])
            assert "the next holder's will be greater" in done.stdout
            assert taken > last, done.stdout
    finally:
        holder.kill()
        holder.communicate()
        if waiter is not None and waiter.poll() is None:
            waiter.kill()
