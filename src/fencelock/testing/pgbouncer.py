"""PgBouncer as a throwaway connection pooler in front of a :class:`PostgreSQLServer`.

Debian's ``pgbouncer`` (1.18). It refuses to run as root, so as root it runs as
``nobody`` (``setpriv``, which execs: the PID held is PgBouncer's), reading its
``pgbouncer.ini`` and ``users.txt`` from a directory of ``/tmp`` that ``nobody`` owns
(pytest's directories are root's alone). Clients log in as ``postgres`` with
:data:`PASSWORD` (SCRAM), which PgBouncer also uses to log in upstream; the database
``postgres`` is the upstream's, and ``pgbouncer`` is its admin console
(:meth:`PgBouncerServer.admin`). No pidfile, no logfile: it logs to stderr, so to
:attr:`log_path`. Nothing persists, so a kill and restart loses only connections.
1.18 keeps no prepared statements across transactions: a client in ``transaction``
mode must not prepare them (psycopg: ``prepare_threshold=None``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from fencelock.testing.postgresql import PASSWORD, PostgreSQLServer
from fencelock.testing.process import STOP_GRACE, ServerProcess
from fencelock.testing.tools import LOOPBACK, FakeClock

POOL_MODES = ("session", "transaction", "statement")
SBIN = Path("/usr/sbin")
_AS_NOBODY = ("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups")


class PgBouncerServer(ServerProcess):
    """PgBouncer on a loopback port, pooling ``upstream``'s ``postgres`` in ``pool_mode``."""

    kind = "pgbouncer"
    program = "pgbouncer"
    package = "pgbouncer"

    def __init__(
        self,
        workdir: Path,
        upstream: PostgreSQLServer,
        *,
        pool_mode: str = "transaction",
        name: str | None = None,
        port: int | None = None,
        clock: FakeClock | None = None,
    ) -> None:
        if pool_mode not in POOL_MODES:
            raise ValueError(f"pool_mode must be one of {POOL_MODES}, not {pool_mode!r}")
        super().__init__(workdir, name=name, port=port, clock=clock)
        self.upstream = upstream
        self.pool_mode = pool_mode
        self.home = Path(tempfile.mkdtemp(prefix=f"fencelock-{self.name}-"))
        self.config_path = self.home / "pgbouncer.ini"

    def executable(self) -> str:
        """``/usr/sbin/pgbouncer`` (not on a user's PATH), else the one on PATH."""
        binary = SBIN / self.program
        return str(binary) if binary.exists() else super().executable()

    def config(self) -> str:
        """Its ``pgbouncer.ini``."""
        return f"""\
[databases]
postgres = host={LOOPBACK} port={self.upstream.port} dbname=postgres

[pgbouncer]
listen_addr = {LOOPBACK}
listen_port = {self.port}
unix_socket_dir =
auth_type = scram-sha-256
auth_file = {self.home / "users.txt"}
admin_users = postgres
pool_mode = {self.pool_mode}
max_client_conn = 1000
; after a failed login upstream (it was down), try again in 1 s, not 15
server_login_retry = 1
server_connect_timeout = 5
"""

    def prepare(self) -> None:
        """Its ini and users file, readable by the user it runs as."""
        super().prepare()
        self.home.mkdir(exist_ok=True)
        (self.home / "users.txt").write_text(f'"postgres" "{PASSWORD}"\n')
        self.config_path.write_text(self.config())
        if os.geteuid() == 0:
            for path in (self.home, self.home / "users.txt", self.config_path):
                shutil.chown(path, "nobody", "nogroup")

    def argv(self) -> list[str]:
        argv = [self.executable(), str(self.config_path)]
        return [*_AS_NOBODY, *argv] if os.geteuid() == 0 else argv

    def ready(self) -> bool:
        """A query through it reached the upstream server."""
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
        """Run one statement through it as ``postgres`` (autocommit); its rows."""
        return self._run("postgres", statement, params)

    def admin(self, command: str) -> list[tuple[Any, ...]]:
        """Run one admin console command (``SHOW POOLS``, ``PAUSE``…); its rows."""
        return self._run("pgbouncer", command, None)

    def _run(self, dbname: str, statement: str, params: Any) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(
            host=LOOPBACK,
            port=self.port,
            user="postgres",
            password=PASSWORD,
            dbname=dbname,
            connect_timeout=2,
            autocommit=True,
            prepare_threshold=None,
        ) as conn:
            cursor = conn.execute(statement, params)
            return cursor.fetchall() if cursor.description else []

    def stop(self, grace: float = STOP_GRACE) -> None:
        """Stop it and remove its files."""
        super().stop(grace)
        shutil.rmtree(self.home, ignore_errors=True)
