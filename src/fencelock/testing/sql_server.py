"""What the throwaway servers that answer SQL share (PostgreSQL, PgBouncer, MariaDB).

Each keeps its files in a directory of ``/tmp`` of its own, ``home``, not in
``workdir``: a Unix socket's path must stay short (108 bytes at most), and a server
run as ``nobody`` must be able to own it. ``home`` is made with the server, kept across
a kill and restart (so a restarted database still has its rows, in ``home/data``) and
removed by :meth:`SQLServer.stop`. A server is ready once it answers ``SELECT 1``.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fencelock.testing.process import STOP_GRACE, ServerOptions, ServerProcess

if TYPE_CHECKING:
    from typing_extensions import Unpack


class SQLServer(ServerProcess):
    """A throwaway server that answers SQL, its files in ``home``."""

    def __init__(self, workdir: Path, **options: Unpack[ServerOptions]) -> None:
        super().__init__(workdir, **options)
        self.home = Path(tempfile.mkdtemp(prefix=f"fencelock-{self.name}-"))

    @property
    def data(self) -> Path:
        """Where a database keeps its tables (a pooler keeps none)."""
        return self.home / "data"

    def sql(self, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
        """Run one statement (autocommit); its rows."""
        raise NotImplementedError

    def select_one(self) -> None:
        """Ask ``SELECT 1`` (:meth:`ready`'s question); a kind may bound its wait."""
        self.sql("SELECT 1")

    def ready(self) -> bool:
        """It answered ``SELECT 1``."""
        try:
            self.select_one()
        except ImportError:  # no driver to ask with: not a server still starting
            raise
        except Exception:  # not up yet: any other failure means "ask again"
            return False
        return True

    def prepare(self) -> None:
        """Its directories (``home`` again after a :meth:`stop`)."""
        super().prepare()
        self.home.mkdir(exist_ok=True)

    def stop(self, grace: float = STOP_GRACE) -> None:
        """Stop it and remove ``home``."""
        super().stop(grace)
        shutil.rmtree(self.home, ignore_errors=True)
