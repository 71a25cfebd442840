"""``fencelock elect``: CMD runs only while leader, stops on a loss, campaigns again;
``elect --observe`` prints each change. Real processes, the embedded SQLite backend."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

from fencelock import clock
from tests.cli.conftest import FENCELOCK, fencelock_cmd
from tests.polling import wait_until


def _wait_for(path: Path) -> str:
    """The text of ``path`` once something is written in it."""

    def written() -> str:
        text = path.read_text() if path.exists() else ""
        return text if text.strip() else ""

    return wait_until(written, what=f"{path} written")


def test_the_command_gets_the_term_and_its_status_passes_through(env: dict[str, str]) -> None:
    done = fencelock_cmd(
        env, "elect", "--value", "node-a", "svc/a", "--",
        "sh", "-c", 'echo "$FENCELOCK_NAME $FENCELOCK_TOKEN"; exit 3',
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert done.stdout.split() == ["svc/a", "1"]
    assert "leading 'svc/a' (term 1)" in done.stderr


def test_a_killed_leader_is_replaced_with_a_greater_term(
    env: dict[str, str], tmp_path: Path
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    leader = subprocess.Popen(
        [FENCELOCK, "elect", "--ttl", "1", "svc/b", "--",
         "sh", "-c", f'echo "$FENCELOCK_TOKEN" > {first}; exec sleep 60'],
        env=env, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        old_term = int(_wait_for(first))
        said = tmp_path / "candidate.err"
        with said.open("w") as stderr:
            candidate = subprocess.Popen(
                [FENCELOCK, "elect", "--ttl", "1", "svc/b", "--",
                 "sh", "-c", f'echo "$FENCELOCK_TOKEN" > {second}'],
                env=env, stderr=stderr,
            )  # fmt: skip
        waiting = _wait_for(said)  # it tried, and waits: seen, not slept for
        assert f"waiting to lead 'svc/b': term {old_term} leads" in waiting, waiting
        assert not second.exists()  # a candidate waits while the leader lives
        killed_at = clock.now()
        leader.kill()
        new_term = int(_wait_for(second))
        failover = clock.now() - killed_at
        assert new_term > old_term
        assert candidate.wait(30) == 0
        print(f"failover after SIGKILL: {failover:.3f}s with a 1 s TTL")
    finally:
        leader.kill()
        leader.wait(10)


def test_a_paused_leader_stops_its_command_and_campaigns_again(
    env: dict[str, str], tmp_path: Path
) -> None:
    terms = tmp_path / "terms"
    leader = subprocess.Popen(
        [FENCELOCK, "elect", "--ttl", "0.5", "--grace", "0.2", "svc/c", "--",
         "sh", "-c", f'echo "$FENCELOCK_TOKEN" >> {terms}; exec sleep 60'],
        env=env, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        _wait_for(terms)
        leader.send_signal(signal.SIGSTOP)
        time.sleep(2.0)  # four TTLs: the leadership is lost when it wakes
        leader.send_signal(signal.SIGCONT)
        wait_until(lambda: len(terms.read_text().split()) >= 2, what="a second term", interval=0.05)
        assert [int(t) for t in terms.read_text().split()] == [1, 2]
        leader.send_signal(signal.SIGTERM)  # forwarded to CMD, which dies of it
        _, stderr = leader.communicate(timeout=30)
        assert leader.returncode == 128 + signal.SIGTERM
        assert "leadership of 'svc/c' (term 1) lost" in stderr
        assert "campaigning again" in stderr
        assert "leading 'svc/c' (term 2)" in stderr
    finally:
        if leader.poll() is None:
            leader.kill()
            leader.wait(10)


def test_observe_prints_each_change_as_json(
    env: dict[str, str], tmp_path: Path, ctrl_c_raises: None
) -> None:
    # (with SIGINT handled here, the observer starts with it at its default, as from a
    # shell: a pytest run as a background job has SIGINT ignored, and so had the observer)
    observer = subprocess.Popen(
        [FENCELOCK, "elect", "--observe", "--json", "--interval", "0.05", "svc/d"],
        env=dict(env, PYTHONFAULTHANDLER="1"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert observer.stdout is not None
        assert json.loads(observer.stdout.readline()) == {"name": "svc/d", "leader": None}
        done = fencelock_cmd(env, "elect", "--value", "node-x", "svc/d", "--", "sleep", "1")
        assert done.returncode == 0, done.stderr
        seen = json.loads(observer.stdout.readline())
        assert (seen["term"], seen["value"]) == (1, "node-x")
        assert json.loads(observer.stdout.readline())["leader"] is None  # resigned
    finally:
        observer.send_signal(signal.SIGINT)
        try:
            _, errors = observer.communicate(timeout=30)
        except subprocess.TimeoutExpired:  # where it hangs: faulthandler prints every thread
            observer.send_signal(signal.SIGABRT)
            _, errors = observer.communicate()
            raise AssertionError(f"Ctrl-C did not end the observer:\n{errors}") from None
    assert observer.returncode == 0, errors


def test_bad_use_is_one_clear_line(env: dict[str, str]) -> None:
    missing = fencelock_cmd(env, "elect", "svc/e")
    assert missing.returncode == 64
    assert "command to run while leader is missing" in missing.stderr
    both = fencelock_cmd(env, "elect", "--observe", "svc/e", "--", "true")
    assert both.returncode == 64
    assert "--observe runs no command" in both.stderr


def test_bad_names_ttls_and_values_are_one_clear_line(env: dict[str, str]) -> None:
    for args, message in [
        (["elect", "--ttl", "0", "svc/f", "--", "true"], "ttl must be > 0"),
        (["elect", "bad name", "--", "true"], "lock name 'bad name'"),
        (["elect", "--value", "x" * 300, "svc/f", "--", "true"], "too long to announce"),
        (["elect", "--observe", "bad name"], "lock name 'bad name'"),
        (["release", "--force", "--yes", "bad name"], "lock name 'bad name'"),
    ]:
        done = fencelock_cmd(env, *args)
        assert done.returncode == 64, (args, done.stderr)
        assert message in done.stderr, args
        assert "Traceback" not in done.stderr, args
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
