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

from pathlib import Path
from typing import TYPE_CHECKING, Any

from fencelock.testing.nobody import as_nobody, give_to_nobody
from fencelock.testing.postgresql import PASSWORD, PostgreSQLServer, postgres_url, run_sql
from fencelock.testing.process import ServerOptions
from fencelock.testing.sql_server import SQLServer
from fencelock.testing.tools import LOOPBACK, SBIN

if TYPE_CHECKING:
    from typing_extensions import Unpack

POOL_MODES = ("session", "transaction", "statement")


class PgBouncerServer(SQLServer):
    """PgBouncer on a loopback port, pooling ``upstream``'s ``postgres`` in ``pool_mode``;
    ready once a ``SELECT 1`` through it reached the upstream server."""

    kind = "pgbouncer"
    program = "pgbouncer"
    package = "pgbouncer"
    directory = SBIN

    def __init__(
        self,
        workdir: Path,
        upstream: PostgreSQLServer,
        *,
        pool_mode: str = "transaction",
        **options: Unpack[ServerOptions],
    ) -> None:
        if pool_mode not in POOL_MODES:
            raise ValueError(f"pool_mode must be one of {POOL_MODES}, not {pool_mode!r}")
        super().__init__(workdir, **options)
        self.upstream = upstream
        self.pool_mode = pool_mode
        self.config_path = self.home / "pgbouncer.ini"

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
        users = self.home / "users.txt"
        users.write_text(f'"postgres" "{PASSWORD}"\n')
        self.config_path.write_text(self.config())
        give_to_nobody(self.home, users, self.config_path)

    def argv(self) -> list[str]:
        return as_nobody([self.executable(), str(self.config_path)])

    @property
    def url(self) -> str:
        """``postgresql://postgres:PASSWORD@127.0.0.1:PORT/postgres``."""
        return postgres_url(self.address)

    def sql(self, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
        """Run one statement through it as ``postgres`` (autocommit); its rows."""
        return run_sql(self.port, statement, params)

    def admin(self, command: str) -> list[tuple[Any, ...]]:
        """Run one admin console command (``SHOW POOLS``, ``PAUSE``…); its rows."""
        return run_sql(self.port, command, dbname="pgbouncer")
