"""Each chaos test runs with this process as a child subreaper, so whatever the
command under test leaves behind stays in this process's tree, where the leftover
checks look (never at the machine's other processes)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.chaos.check_runs import adopting_orphans


@pytest.fixture(autouse=True)
def _adopt_orphans() -> Iterator[None]:
    with adopting_orphans():
        yield
