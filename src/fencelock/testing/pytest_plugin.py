"""A pytest plugin: a failing test's report shows what its servers logged meanwhile.

Load it with ``pytest_plugins = ["fencelock.testing.pytest_plugin"]`` in a
``conftest.py``. When a test's setup, call or teardown fails, the report gets a
"Captured server log" section with, for every throwaway server started in this
process, what it wrote to its log since the test began (its tail), and where the
whole log is. Servers that logged nothing meanwhile are only counted.
"""

from __future__ import annotations

import weakref
from collections.abc import Generator

import pytest

from fencelock.testing.process import ServerProcess, started_servers

REPORT_TAIL = 2000  # characters per server
_MARKS = pytest.StashKey["weakref.WeakKeyDictionary[ServerProcess, int]"]()


def log_marks() -> weakref.WeakKeyDictionary[ServerProcess, int]:
    """The size of every started server's log now."""
    marks: weakref.WeakKeyDictionary[ServerProcess, int] = weakref.WeakKeyDictionary()
    for server in started_servers():
        marks[server] = server.log_size()
    return marks


def logs_since(marks: weakref.WeakKeyDictionary[ServerProcess, int]) -> str:
    """What every started server logged after ``marks`` (all of it for newer servers)."""
    shown: list[str] = []
    quiet = 0
    for server in started_servers():
        text = server.log(REPORT_TAIL, since=marks.get(server, 0))
        if not text:
            quiet += 1
            continue
        state = "running" if server.alive else "exited"
        shown.append(f"--- {server.name} at {server.address}, {state} ({server.log_path}) ---")
        shown.append(text.rstrip("\n"))
    if not shown:
        return ""
    if quiet:
        shown.append(f"({quiet} other server(s) logged nothing during this test)")
    return "\n".join(shown)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Mark every server's log before the test's fixtures start more servers."""
    item.stash[_MARKS] = log_marks()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Attach the servers' logs to a failed setup, call or teardown report."""
    report = yield
    if report.failed:
        marks = item.stash.get(_MARKS, weakref.WeakKeyDictionary())
        text = logs_since(marks)
        if text:
            report.sections.append((f"Captured server log {report.when}", text))
    return report
