"""PostgreSQL 15 as a throwaway server (Debian's ``postgresql-15``).

``initdb`` and ``postgres`` refuse to run as root, so as root both run as ``nobody``
(``setpriv``, which execs: the PID held is the postmaster's) in a directory of
``/tmp`` that ``nobody`` owns (pytest's directories are root's alone). The cluster is
made once (``prepare``) and kept across a kill and restart, so the restarted server
still has its rows; :meth:`stop` removes it. Password logins over TCP
(``scram-sha-256``; the ``postgres`` user's password is :data:`PASSWORD`), and no
``fsync`` (a commit reaches the kernel, not the disk: it survives a killed server, not a
power cut): a test server, not a database. Signals go to the whole process
group, so a pause stops the backends too and a kill leaves none behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fencelock.testing.nobody import as_nobody, give_to_nobody
from fencelock.testing.sql_server import SQLServer
from fencelock.testing.tools import LOOPBACK, ToolMissing

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from fencelock.testing.process import ServerOptions

BIN = Path("/usr/lib/postgresql/15/bin")
PASSWORD = "fencelock"  # noqa: S105 (the password of a throwaway test server)


def postgres_url(address: str) -> str:
    """``postgresql://postgres:PASSWORD@ADDRESS/postgres``."""
    return f"postgresql://postgres:{PASSWORD}@{address}/postgres"


def run_sql(
    port: int, statement: str, params: Any = None, *, dbname: str = "postgres"
) -> list[tuple[Any, ...]]:
    """Run one statement as ``postgres`` on the loopback ``port`` (autocommit); its rows.

    Nothing is prepared (one statement a connection never would be), so it runs
    through PgBouncer in ``transaction`` mode too.
    """
    import psycopg

    with psycopg.connect(
        host=LOOPBACK,
        port=port,
        user="postgres",
        password=PASSWORD,
        dbname=dbname,
        connect_timeout=2,
        autocommit=True,
        prepare_threshold=None,
    ) as conn:
        cursor = conn.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


class PostgreSQLServer(SQLServer):
    """One PostgreSQL cluster on a loopback port; its database ``postgres``."""

    kind = "postgresql"
    program = "postgres"
    package = "postgresql-15"

    def __init__(self, workdir: Path, **options: Unpack[ServerOptions]) -> None:
        super().__init__(workdir, **options)
        self._family: set[int] = set()  # the children signalled, until they exit

    def executable(self) -> str:
        binary = BIN / self.program
        if not binary.exists():
            raise ToolMissing(f"{binary} is missing: apt-get install {self.package}")
        return str(binary)

    def argv(self) -> list[str]:
        settings = {
            "listen_addresses": LOOPBACK,
            "port": str(self.port),
            "unix_socket_directories": str(self.home),
            "fsync": "off",
            "full_page_writes": "off",
            "max_connections": "200",
            "shared_buffers": "16MB",
        }
        options = [arg for key, value in settings.items() for arg in ("-c", f"{key}={value}")]
        return as_nobody([self.executable(), "-D", str(self.data), *options])

    def prepare(self) -> None:
        """The cluster, once (initdb), owned by the user it runs as."""
        super().prepare()
        give_to_nobody(self.home)
        if (self.data / "PG_VERSION").exists():
            return
        password_file = self.home / "password"
        password_file.write_text(PASSWORD + "\n")
        give_to_nobody(password_file)
        initdb = [
            str(BIN / "initdb"),
            *("-D", str(self.data), "-U", "postgres", "--pwfile", str(password_file)),
            *("--auth-local=trust", "--auth-host=scram-sha-256", "--no-sync"),
            *("-E", "UTF8", "--locale=C.UTF-8"),
        ]
        done = subprocess.run(as_nobody(initdb), capture_output=True, text=True, check=False)  # noqa: S603 (a test server with arguments built here, no shell)
        password_file.unlink()
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed:\n{done.stdout}\n{done.stderr}")

    @property
    def url(self) -> str:
        """``postgresql://postgres:PASSWORD@127.0.0.1:PORT/postgres``."""
        return postgres_url(self.address)

    def sql(self, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
        """Run one statement as ``postgres`` (autocommit); its rows."""
        return run_sql(self.port, statement, params)

    def _signal(self, sig: signal.Signals) -> bool:
        """To the postmaster and each of its children (the backends serving connections,
        the background workers): each child calls ``setsid()``, so it is in no group of
        the postmaster's. The postmaster is stopped while its children are listed, so
        that it forks no new one meanwhile, and signalled last: once it is killed, its
        children are the init process's and no longer listed as its own."""
        if not self.alive or self.proc is None:
            return False
        postmaster = self.proc.pid
        with contextlib.suppress(ProcessLookupError):
            if sig is not signal.SIGCONT:
                os.kill(postmaster, signal.SIGSTOP)
            children = _children(postmaster)
            self._family.update(children)
            for child in children:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child, sig)
            os.kill(postmaster, sig)
            if sig not in (signal.SIGSTOP, signal.SIGKILL):
                os.kill(postmaster, signal.SIGCONT)
        return True

    def _reap(self, timeout: float) -> bool:
        """The postmaster, then each child signalled: a restart while a killed backend
        still holds the cluster's shared memory would fail ("pre-existing shared memory
        block is still in use")."""
        deadline = time.monotonic() + timeout
        if not super()._reap(timeout):
            return False
        while any(_running(child) for child in self._family):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        self._family.clear()
        return True


def _running(pid: int) -> bool:
    """True while ``pid`` runs (a zombie has exited: it holds no memory)."""
    try:
        stat = (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def _children(parent: int) -> list[int]:
    """The PIDs whose parent is ``parent`` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rpartition(")")[2].split()[1]) == parent:
            found.append(int(entry.name))
    return found
