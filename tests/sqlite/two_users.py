"""Run by test_shared_file.py as root: two users of one group take one lock in one file.

``python -m tests.sqlite.two_users URL SCRATCH_URL GROUP UID_A UID_B``. User A takes
``deploy/prod`` and holds it until user B has found it busy; then B takes it. Prints
``a TOKEN``, ``b busy``, ``b TOKEN``. Each user is a fork of this process that drops
root (the interpreter may live where other users cannot read), with umask 002.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

import fencelock
from fencelock.errors import LockTimeout


def as_user(uid: int, gid: int, home: str, work: Callable[[], None], keep: set[int]) -> int:
    """Fork; the child becomes ``uid`` (group ``gid``), runs ``work`` and exits."""
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        for fd in PIPE_ENDS - keep:  # so a peer that dies is seen as end of file
            os.close(fd)
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
        os.umask(0o002)
        os.environ["HOME"] = home
        work()
        code = 0
    except BaseException as exc:
        print(f"user {uid}: {type(exc).__name__}: {exc}", flush=True)
    finally:
        os._exit(code)


B_MAY_TRY, A_HOLDS = os.pipe()
A_MAY_RELEASE, B_TRIED = os.pipe()
PIPE_ENDS = {B_MAY_TRY, A_HOLDS, A_MAY_RELEASE, B_TRIED}


def main() -> int:
    url, scratch = sys.argv[1], sys.argv[2]
    gid, uid_a, uid_b = (int(arg) for arg in sys.argv[3:6])
    with fencelock.connect(scratch) as warm:  # loads every module while still root
        warm.lock("warm/up", ttl=5).acquire(timeout=0).release()

    def first() -> None:
        with fencelock.connect(url) as client, client.lock("deploy/prod", ttl=30) as lease:
            print("a", lease.token, flush=True)
            os.write(A_HOLDS, b"x")
            os.read(A_MAY_RELEASE, 1)

    def second() -> None:
        os.read(B_MAY_TRY, 1)
        with fencelock.connect(url) as client:
            lock = client.lock("deploy/prod", ttl=30)
            try:
                lock.acquire(timeout=0).release()
                print("b not busy", flush=True)
            except LockTimeout:
                print("b busy", flush=True)
            os.write(B_TRIED, b"x")
            lease = lock.acquire(timeout=20)
            print("b", lease.token, flush=True)
            lease.release()

    pids = [
        as_user(uid_a, gid, "/nonexistent-a", first, {A_HOLDS, A_MAY_RELEASE}),
        as_user(uid_b, gid, "/nonexistent-b", second, {B_MAY_TRY, B_TRIED}),
    ]
    for fd in PIPE_ENDS:
        os.close(fd)
    return max(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids)


if __name__ == "__main__":
    sys.exit(main())
