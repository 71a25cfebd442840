"""``fencelock top --once`` on every backend another process can see: the held leases
under a prefix, each with its holder and token (the listing is the backend's own)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import fencelock
from tests.contract.conftest import BackendCase

FENCELOCK = str(Path(sys.executable).parent / "fencelock")


def test_top_shows_each_held_lease_with_holder_and_token(
    backend: BackendCase, client: fencelock.Client, name: str
) -> None:
    if not backend.cross_process:
        pytest.skip("memory:// is seen by its own process only")
    prefix = name.rsplit("/", 1)[0]
    held = [client.lock(f"{prefix}/seat-{n}", ttl=30).acquire() for n in range(2)]
    shown = subprocess.run(
        [FENCELOCK, "top", f"{prefix}/", "--url", backend.url, "--once"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert f"2 held under '{prefix}/'" in shown.stdout
    assert shown.stdout.count(f"{socket.gethostname()}:{os.getpid()}") == 2  # the holder
    for lease in held:
        assert f"{lease.name} " in shown.stdout
        assert f" {lease.token} " in shown.stdout
        lease.release()
