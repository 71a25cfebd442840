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
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from fencelock.testing.process import STOP_GRACE, ServerProcess
from fencelock.testing.tools import LOOPBACK, FakeClock, ToolMissing

BIN = Path("/usr/lib/postgresql/15/bin")
PASSWORD = "fencelock"
_AS_NOBODY = ("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups")


class PostgreSQLServer(ServerProcess):
    """One PostgreSQL cluster on a loopback port; its database ``postgres``."""

    kind = "postgresql"
    program = "postgres"
    package = "postgresql-15"

    def __init__(
        self,
        workdir: Path,
        *,
        name: str | None = None,
        port: int | None = None,
        clock: FakeClock | None = None,
    ) -> None:
        super().__init__(workdir, name=name, port=port, clock=clock)
        self.home = Path(tempfile.mkdtemp(prefix=f"fencelock-{self.name}-"))
        self.data = self.home / "data"

    def executable(self) -> str:
        binary = BIN / self.program
        if not binary.exists():
            raise ToolMissing(f"{binary} is missing: apt-get install {self.package}")
        return str(binary)

    def _as_server_user(self, argv: list[str]) -> list[str]:
        return [*_AS_NOBODY, *argv] if os.geteuid() == 0 else argv

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
        return self._as_server_user([self.executable(), "-D", str(self.data), *options])

    def prepare(self) -> None:
        """The cluster, once (initdb), owned by the user it runs as."""
        super().prepare()
        self.home.mkdir(exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.home, "nobody", "nogroup")
        if (self.data / "PG_VERSION").exists():
            return
        password_file = self.home / "password"
        password_file.write_text(PASSWORD + "\n")
        if os.geteuid() == 0:
            shutil.chown(password_file, "nobody", "nogroup")
        initdb = [
            str(BIN / "initdb"),
            *("-D", str(self.data), "-U", "postgres", "--pwfile", str(password_file)),
            *("--auth-local=trust", "--auth-host=scram-sha-256", "--no-sync"),
            *("-E", "UTF8", "--locale=C.UTF-8"),
        ]
        done = subprocess.run(
            self._as_server_user(initdb), capture_output=True, text=True, check=False
        )
        password_file.unlink()
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed:\n{done.stdout}\n{done.stderr}")

    def ready(self) -> bool:
        try:
            self.sql("SELECT 1")
        except Exception:  # not up yet: any failure means "ask again"
            return False
        return True

    @property
    def url(self) -> str:
        """``postgresql://postgres:PASSWORD@127.0.0.1:PORT/postgres``."""
        return f"postgresql://postgres:{PASSWORD}@{self.address}/postgres"

    def sql(self, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
        """Run one statement as ``postgres`` (autocommit); its rows."""
        import psycopg

        with psycopg.connect(
            host=LOOPBACK,
            port=self.port,
            user="postgres",
            password=PASSWORD,
            dbname="postgres",
            connect_timeout=2,
            autocommit=True,
        ) as conn:
            cursor = conn.execute(statement, params)
            return cursor.fetchall() if cursor.description else []

    def stop(self, grace: float = STOP_GRACE) -> None:
        """Stop it and remove its cluster."""
        super().stop(grace)
        shutil.rmtree(self.home, ignore_errors=True)

    def _signal(self, sig: signal.Signals) -> bool:
        """To the postmaster and each of its children (the backends serving connections,
        the background workers): each child calls ``setsid()``, so it is in no group of
        the postmaster's. The postmaster first, so that it forks no new child meanwhile."""
        if not self.alive or self.proc is None:
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, sig)
        for child in _children(self.proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, sig)
        return True


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
