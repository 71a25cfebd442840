"""Every page of docs/migrating/ runs as a reader would run it: its ```python snippets in
order, in one namespace, against real servers.

A snippet names a server by the address it has on the reader's machine
(``redis://localhost:6379/0``, ``zookeeper://localhost:2181/myapp``, kazoo's
``KazooClient(hosts="127.0.0.1:2181")``, ``postgresql://app:secret@localhost:5432/app``):
the test starts a throwaway server of that kind and rewrites the address to it. For Redis,
ZooKeeper and etcd only the host and port change (the database number, the base node and
the options stay as written); for PostgreSQL and MySQL the user, password and database
become the server's. Only the servers a page names are started, each once per test
process (ZooKeeper, a JVM, is the slowest to start), and the embedded SQLite files a
snippet makes land in a directory of the test's.

Blocks fenced as ```py are shown and not run: the code of a peer library that the test
extra does not install (tooz.md's: tooz is heavy, and only in the bench extra). Peer code
whose library is installed (redis-py, python-redis-lock, filelock, kazoo) is in
```python blocks and runs with the page, so a page also checks what it says the peer
does (kazoo.md: kazoo's Lock and ReadLock/WriteLock queue in fencelock's lines).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from fencelock.testing import ServerPool, ServerProcess

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs" / "migrating").glob("*.md"))
SNIPPET = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
LOCAL = r"(?:localhost|127\.0\.0\.1)"
ANY_LOCAL_PORT = re.compile(rf"\b{LOCAL}:(\d+)\b")


@dataclass(frozen=True)
class Kind:
    """A kind of server a page may name: its usual port, and how to start one."""

    port: int
    start: Callable[[ServerPool], ServerProcess]
    whole_url: bool = False  # user, password and database are the server's too (SQL)

    def address(self) -> re.Pattern[str]:
        """What the page writes for the server (with ``whole_url``: after the scheme)."""
        if self.whole_url:
            return re.compile(rf"(?<=://)(?:[^@/\s'\"]*@)?{LOCAL}:{self.port}(?:/\w+)?(?![\w:])")
        return re.compile(rf"\b{LOCAL}:{self.port}(?![\w:])")

    def rewrite(self, code: str, server: ServerProcess) -> str:
        """``code`` with every address of this kind pointing at ``server``."""
        target = server.url.split("://", 1)[1] if self.whole_url else server.address
        return self.address().sub(target, code)


KINDS: dict[str, Kind] = {
    "redis": Kind(6379, lambda pool: pool.redis(name="pages-redis")),
    "zookeeper": Kind(2181, lambda pool: pool.zookeeper(1, name="pages-zookeeper")[0]),
    "etcd": Kind(2379, lambda pool: pool.etcd(1, name="pages-etcd")[0]),
    "postgresql": Kind(5432, lambda pool: pool.postgresql(name="pages-postgresql"), True),
    "mysql": Kind(3306, lambda pool: pool.mariadb(name="pages-mariadb"), True),
}
PORTS = {kind.port: name for name, kind in KINDS.items()}


def servers_named(code: str) -> list[str]:
    """The kinds of server ``code`` names by a local address; an address no kind has
    (a port the test cannot serve) fails the test, naming it."""
    ports = {int(port) for port in ANY_LOCAL_PORT.findall(code)}
    unknown = sorted(ports - PORTS.keys())
    assert not unknown, (
        f"the snippets name local port(s) {unknown}; the test serves only "
        + ", ".join(f"{name} on {kind.port}" for name, kind in KINDS.items())
    )
    return sorted(PORTS[port] for port in ports)


@pytest.fixture(scope="session")
def page_servers(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[[str], ServerProcess]]:
    """The server of a kind, started the first time a page asks for it."""
    started: dict[str, ServerProcess] = {}
    with ServerPool(tmp_path_factory.mktemp) as pool:

        def server(kind: str) -> ServerProcess:
            if kind not in started:
                started[kind] = KINDS[kind].start(pool)
            return started[kind]

        yield server


@pytest.mark.parametrize("page", PAGES, ids=[page.stem for page in PAGES])
def test_every_snippet_runs(
    page: Path,
    page_servers: Callable[[str], ServerProcess],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # the files a snippet makes (locks.db) land here
    snippets = SNIPPET.findall(page.read_text())
    assert snippets, f"{page.name} has no python snippet"
    servers = {kind: page_servers(kind) for kind in servers_named("".join(snippets))}
    namespace: dict[str, object] = {"__name__": f"docs.migrating.{page.stem}"}
    for number, written in enumerate(snippets, 1):
        code = written
        for kind, server in servers.items():
            code = KINDS[kind].rewrite(code, server)
        exec(compile(code, f"{page.name} snippet {number}", "exec"), namespace)  # noqa: S102 (the page's example code is what is under test)


@pytest.mark.parametrize(
    ("written", "kind", "rewritten"),
    [
        ('connect("redis://localhost:6379/0?keys=bare")', "redis", "redis://H:P/0?keys=bare"),
        ('KazooClient(hosts="127.0.0.1:2181")', "zookeeper", 'hosts="H:P"'),
        ('connect("zookeeper://localhost:2181/myapp")', "zookeeper", "zookeeper://H:P/myapp"),
        ('connect("etcd://localhost:2379")', "etcd", "etcd://H:P"),
        (
            '"postgresql://app:pw@localhost:5432/app?timeout=2"',
            "postgresql",
            "postgresql://U@H:P/D?timeout=2",
        ),
        ('"postgresql+advisory://localhost:5432"', "postgresql", "+advisory://U@H:P/D"),
        ('"mysql://app:pw@127.0.0.1:3306/app"', "mysql", "mysql://U@H:P/D"),
    ],
    ids=["redis", "kazoo-hosts", "zookeeper", "etcd", "postgresql", "advisory", "mysql"],
)
def test_each_address_form_becomes_the_servers(written: str, kind: str, rewritten: str) -> None:
    class Server:  # what the rewrite reads of a server
        address = "H:P"
        url = "scheme://U@H:P/D"

    assert servers_named(written) == [kind]
    assert rewritten in KINDS[kind].rewrite(written, Server())  # type: ignore[arg-type]
