"""Every test's failure report shows what its throwaway servers logged meanwhile."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

pytest_plugins = ["fencelock.testing.pytest_plugin"]


@pytest.fixture
def ctrl_c_raises() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt in the main thread during the test, also when
    pytest was started with SIGINT ignored (as a shell's background job is)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
