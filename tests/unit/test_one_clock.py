"""Every duration the library's own logic measures is read from ``fencelock.clock``: the
one seam the simulator replaces (docs/safety.md). A primitive that read
``time.monotonic()`` itself ran on real time inside the simulator's virtual time (the
barrier did, and its runs were not decided by their seed)."""

from __future__ import annotations

import re
from pathlib import Path

import fencelock

ROOT = Path(fencelock.__file__).parent
# The library's logic: what the simulator runs. Backends' wire-level timing (a pooled
# connection's idle time, a driver's connect loop) and the tools are outside it.
LOGIC = ["engine", "primitives", "lease.py", "renewer.py", "client.py", "client_leases.py"]
READS_TIME = re.compile(r"\btime\.(monotonic|time|perf_counter|clock_gettime)\(")


def logic_files() -> list[Path]:
    files: list[Path] = []
    for part in LOGIC:
        path = ROOT / part
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return files


def test_the_library_logic_reads_time_from_the_one_clock() -> None:
    readers = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in logic_files()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if READS_TIME.search(line)
    ]
    assert not readers, "read fencelock.clock.now() instead:\n" + "\n".join(readers)


def test_the_rule_sees_a_direct_read() -> None:
    assert READS_TIME.search("    ends = time.monotonic() + timeout")
    assert not READS_TIME.search("    ends = clock.now() + timeout")
    assert len(logic_files()) > 20
