"""MariaDB 10.11 as a throwaway server (Debian's ``mariadb-server``).

``mariadb-install-db`` makes the data directory once (``prepare``), with the database
``fencelock`` and the password :data:`PASSWORD` for ``root`` over TCP; it is kept across
a kill and restart, so the restarted server still has its rows, and :meth:`stop`
removes it. As root, ``mariadbd`` runs as root (``--user=root``: without it, it refuses).
It reads no option file (``--no-defaults``), keeps no binary log, and flushes InnoDB's
log once a second rather than at each commit (a commit survives a killed server, not a
power cut): a test server, not a database. It logs to stderr, so to :attr:`log_path`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

from fencelock.testing.sql_server import SQLServer
from fencelock.testing.tools import LOOPBACK, SBIN, require_binary

PASSWORD = "fencelock"  # noqa: S105 (the password of a throwaway test server)
DATABASE = "fencelock"
# what both the bootstrap and the server are given: small, and the same redo log size
# (given another size, the server would rebuild the redo log when it starts)
_SIZES = ("--innodb-buffer-pool-size=32M", "--innodb-log-file-size=8M")
_SETUP_SQL = f"""
DELETE FROM mysql.global_priv WHERE User = 'root' AND Host NOT IN ('localhost', '127.0.0.1');
DELETE FROM mysql.proxies_priv WHERE Host NOT IN ('localhost', '127.0.0.1');
FLUSH PRIVILEGES;
ALTER USER root@'127.0.0.1' IDENTIFIED BY '{PASSWORD}';
CREATE DATABASE {DATABASE} CHARACTER SET utf8mb4;
"""  # noqa: S608 (constants)


class MariaDBServer(SQLServer):
    """One MariaDB server on a loopback port; its database ``fencelock``."""

    kind = "mariadb"
    program = "mariadbd"
    package = "mariadb-server"
    directory = SBIN

    def _as_user(self) -> list[str]:
        return ["--user=root"] if os.geteuid() == 0 else []

    def argv(self) -> list[str]:
        return [
            self.executable(),
            "--no-defaults",
            *self._as_user(),
            f"--datadir={self.data}",
            f"--bind-address={LOOPBACK}",
            f"--port={self.port}",
            f"--socket={self.data / 's.sock'}",
            f"--pid-file={self.data / 'm.pid'}",
            "--skip-name-resolve",
            "--skip-log-bin",
            "--innodb-flush-log-at-trx-commit=2",
            "--performance-schema=OFF",
            "--character-set-server=utf8mb4",
            "--max-connections=200",
            # the default (2000) asks for more open files than a container allows
            "--table-open-cache=400",
            "--key-buffer-size=8M",
            "--aria-pagecache-buffer-size=8M",
            *_SIZES,
        ]

    def prepare(self) -> None:
        """The data directory, once (``mariadb-install-db``)."""
        super().prepare()
        if (self.data / DATABASE).is_dir():
            return
        shutil.rmtree(self.data, ignore_errors=True)  # a bootstrap that failed half-way
        setup = self.home / "setup.sql"
        setup.write_text(_SETUP_SQL)
        install = [
            require_binary("mariadb-install-db", self.package),
            "--no-defaults",
            *self._as_user(),
            f"--datadir={self.data}",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            "--skip-name-resolve",
            f"--extra-file={setup}",
            *_SIZES,
        ]
        done = subprocess.run(install, capture_output=True, text=True, check=False, timeout=120)  # noqa: S603 (a test server with arguments built here, no shell)
        setup.unlink()
        if done.returncode != 0 or not (self.data / DATABASE).is_dir():
            raise RuntimeError(f"mariadb-install-db failed:\n{done.stdout}\n{done.stderr}")

    def select_one(self) -> None:
        """``SELECT 1``, each wait for the server 2 s at most (see :meth:`sql`)."""
        self.sql("SELECT 1", timeout=2)

    @property
    def url(self) -> str:
        """``mysql://root:PASSWORD@127.0.0.1:PORT/fencelock``."""
        return f"mysql://root:{PASSWORD}@{self.address}/{DATABASE}"

    def connect(self, timeout: float = 30.0) -> Any:
        """A PyMySQL connection as ``root`` to ``fencelock`` (autocommit); ``timeout``
        bounds each wait for the server (see :meth:`sql`)."""
        import pymysql

        return pymysql.connect(
            host=LOOPBACK,
            port=self.port,
            user="root",
            password=PASSWORD,
            database=DATABASE,
            connect_timeout=2,
            read_timeout=timeout,
            write_timeout=timeout,
            autocommit=True,
        )

    def sql(
        self, statement: str, params: Any = None, *, timeout: float = 30.0
    ) -> list[tuple[Any, ...]]:
        """Run one statement as ``root`` in ``fencelock`` (autocommit); its rows.

        ``params`` fill its ``%s`` placeholders. ``timeout`` bounds each wait for the
        server, the greeting included (PyMySQL's ``connect_timeout`` covers only TCP's
        connect, which a paused server's kernel still completes).
        """
        conn = self.connect(timeout)
        try:
            with conn.cursor() as cursor:
                cursor.execute(statement, params)
                return list(cursor.fetchall()) if cursor.description else []
        finally:
            conn.close()
