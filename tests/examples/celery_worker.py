"""A real Celery prefork worker over a real Redis, for a tasks module, and that module
imported in the test's process with the worker's settings."""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from unittest import mock

from fencelock.testing.pool import ServerPool

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def celery_worker(
    module: str, home: Path, concurrency: int = 2, path: Path = ROOT
) -> Iterator[dict[str, str]]:
    """A Redis and a prefork worker of ``concurrency`` processes running ``module``'s
    tasks (importable from ``path`` or the repository; its log in ``home``); the
    environment they use: the broker on Redis's database 1, ``FENCELOCK_URL`` on 0."""
    with ServerPool.under(home) as pool:
        redis_url = pool.redis(name="celery").url
        env = dict(
            os.environ,
            CELERY_BROKER_URL=redis_url.replace("/0", "/1"),
            FENCELOCK_URL=redis_url,
            PYTHONPATH=os.pathsep.join(dict.fromkeys([str(path), str(ROOT)])),
        )
        log = (home / "worker.log").open("w")
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", module, "worker", "--pool=prefork",
             f"--concurrency={concurrency}", "--loglevel=warning", "--without-heartbeat",
             "--without-gossip", "--without-mingle"],
            cwd=path, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        try:
            yield env
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
            log.close()


def tasks_module(module: str, env: dict[str, str]) -> ModuleType:
    """``module``, imported with the worker's settings (this process's own environment is
    left as it was); its app's broker and result backend the worker's."""
    settings = {key: env[key] for key in ("CELERY_BROKER_URL", "FENCELOCK_URL")}
    with mock.patch.dict(os.environ, settings):
        tasks = importlib.import_module(module)
    tasks.app.conf.broker_url = tasks.app.conf.result_backend = env["CELERY_BROKER_URL"]
    return tasks
