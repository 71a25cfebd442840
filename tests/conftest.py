"""Every test's failure report shows what its throwaway servers logged meanwhile."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest
from hypothesis import settings

pytest_plugins = ["fencelock.testing.pytest_plugin"]

# No per-example deadline: a loaded 2-core machine (CI beside other work) takes longer
# than hypothesis's 200 ms for an example now and then; a test's own bounds stay.
settings.register_profile("fencelock", deadline=None)
settings.load_profile("fencelock")


@pytest.fixture
def ctrl_c_raises() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt in the main thread during the test, also when
    pytest was started with SIGINT ignored (as a shell's background job is)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
