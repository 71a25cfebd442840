"""``run_check``: one check run from start to verdict.

It starts the lock servers if asked (``--servers``), prepares the run directory
and the resource, hands over to the :class:`~fencelock.check.conductor.Conductor`
(clients, nemeses, the duration; with a hard deadline: stragglers are killed, and
a reaper process kills whatever is left should the runner itself die), merges the
history files and checks them (:func:`fencelock.check.checker.check`), and writes
the report.

Nothing is left running afterwards: not on success, not on an error, not on
Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import fencelock
from fencelock.check.checker import CheckResult, check
from fencelock.check.conductor import Conductor, Setup
from fencelock.check.history import History, read_history
from fencelock.check.nemesis import NETWORK_NEMESES
from fencelock.check.options import CheckOptions, validate
from fencelock.check.progress import Observer, QuietObserver
from fencelock.check.servers import (
    ProxyHub,
    Reaper,
    ServerSet,
    faketime_preload,
    require_binary,
)
from fencelock.check.workloads import create_resource
from fencelock.engine.urls import parse_url


@dataclass
class CheckRun:
    """A finished run: the verdict, the history, and where its files are."""

    result: CheckResult
    history: History
    directory: Path
    kept: bool  # False: the directory was a temporary one and has been removed
    url: str


_RUN_FILES = (
    "history-*.jsonl",
    "client-*.log",
    "resource.db*",
    "locks.db*",
    "redis-*",
    "params.json",
    "result.json",
    "report.html",
)


def _prepare_directory(report: Path | None) -> Path:
    if report is None:
        return Path(tempfile.mkdtemp(prefix="fencelock-check-"))
    report.mkdir(parents=True, exist_ok=True)
    for pattern in _RUN_FILES:  # an earlier run's files would merge into this history
        for old in report.glob(pattern):
            if old.is_file():
                old.unlink()
    return report.resolve()


def _redis_timeout(ttl: float) -> float:
    """Per-request timeout of harness-made redis:// URLs: a stall is noticed within the TTL."""
    return round(min(max(ttl / 2, 0.1), 2.0), 3)


def _params(options: CheckOptions, url: str, lock_name: str) -> dict[str, object]:
    return {
        "workload": options.workload,
        "backend": parse_url(url).redacted,
        "servers": options.servers,
        "clients": options.clients,
        "duration": options.duration,
        "ttl": options.ttl,
        "work": options.work,
        "nemeses": list(options.nemeses),
        "fencing": options.fencing,
        "fence_reads": options.fencing and options.fence_reads,
        "fence_with": options.fence_with,
        "seed": options.seed,
        "lock": lock_name,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so the cleanup runs (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _check_tools(options: CheckOptions) -> None:
    if options.servers is not None:
        require_binary("redis-server", "redis-server")
    if "clock" in options.nemeses:
        faketime_preload()


def _probe_backend(url: str, lock_name: str) -> None:
    """Raise BackendUnavailable now, not in eight clients later."""
    with fencelock.connect(url) as client:
        client.inspect(lock_name)


def run_check(options: CheckOptions, observer: Observer | None = None) -> CheckRun:
    """Run one check; the verdict and the history. Raises ConfigError, BackendUnavailable."""
    validate(options)
    _check_tools(options)
    observer = observer or QuietObserver()
    directory = _prepare_directory(options.report)
    lock_name = f"fencelock-check/{os.getpid()}-{int(time.time())}/{options.workload}"
    finished = keep = False
    try:
        with _terminate_as_interrupt(), contextlib.ExitStack() as stack:
            reaper = Reaper()
            stack.callback(reaper.close)
            servers = None
            if options.servers is not None:
                servers = ServerSet.start(
                    options.servers,  # type: ignore[arg-type]
                    directory,
                    faketime="clock" in options.nemeses,
                    timeout=_redis_timeout(options.ttl),
                )
                stack.callback(_stop_servers, servers, reaper)
                for pid in servers.pids():
                    reaper.watch(pid)
                url = servers.url
            else:
                url = options.url or f"sqlite:///{directory / 'locks.db'}"
            _probe_backend(url, lock_name)
            proxies = None
            if any(n in NETWORK_NEMESES for n in options.nemeses):
                proxies = ProxyHub()
                stack.callback(proxies.close)
            resource = directory / "resource.db"
            create_resource(resource)
            params = _params(options, url, lock_name)
            (directory / "params.json").write_text(json.dumps(params, indent=2) + "\n")
            setup = Setup(directory, url, lock_name, servers, proxies, reaper, resource, params)
            Conductor(options, setup, observer).run()
        history = read_history(sorted(directory.glob("history-*.jsonl")), params)
        result = check(history)
        keep = options.report is not None or not result.ok
        if keep:
            write_report(result, history, directory)
        finished = True
    finally:
        if not (finished and keep):
            shutil.rmtree(directory, ignore_errors=True)
    return CheckRun(result, history, directory, keep, url)


def _stop_servers(servers: ServerSet, reaper: Reaper) -> None:
    for node in servers.nodes:
        pid = node.pid
        node.stop()
        if pid is not None:
            reaper.unwatch(pid)


def write_report(result: CheckResult, history: History, directory: Path) -> None:
    """``result.json`` and ``report.html`` beside the history files."""
    from fencelock.check.report.json_doc import to_json
    from fencelock.check.report.page import write_html

    doc = to_json(result, history)
    (directory / "result.json").write_text(json.dumps(doc, indent=2, default=str) + "\n")
    write_html(result, history, directory / "report.html")
