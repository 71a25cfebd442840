"""Primitives reach their client through its public methods and ``client.internals`` only."""

from __future__ import annotations

import re
from pathlib import Path

import fencelock

SOURCE = Path(fencelock.__file__).parent
# ``client._x`` or ``self._client._x``; not ``self.client._x`` (kazoo's client, in the
# ZooKeeper backend, is not ours)
PRIVATE_READ = re.compile(r"(?<![.\w])client\._[a-z]|_client\._[a-z]")


def test_no_module_but_client_py_reads_a_clients_private_attributes() -> None:
    readers = [
        f"{path.relative_to(SOURCE)}:{number}"
        for path in sorted(SOURCE.rglob("*.py"))
        if path.name != "client.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if PRIVATE_READ.search(line)
    ]
    assert readers == []


def test_the_internals_are_the_clients_own_backend_and_holdings() -> None:
    with fencelock.connect("memory://seam") as client:
        lease = client.lock("seam/a").acquire()
        assert client.internals.backend.url == client.url
        assert client.internals.holdings.held() == [lease] == client.held()
        lease.release()
