"""The contract suite runs once per backend URL; later backends join BACKENDS."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import fencelock


@dataclass(frozen=True)
class BackendCase:
    url: str
    cross_process: bool  # leases are shared between processes (not memory://)
    persistent: bool  # tokens survive closing every client (a restart)


def _memory(tmp: Path) -> BackendCase:
    return BackendCase(f"memory://{secrets.token_hex(6)}", cross_process=False, persistent=False)


def _sqlite(tmp: Path) -> BackendCase:
    return BackendCase(f"sqlite:///{tmp / 'locks.db'}", cross_process=True, persistent=True)


BACKENDS = {"memory": _memory, "sqlite": _sqlite}


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> BackendCase:
    case: BackendCase = BACKENDS[request.param](tmp_path)
    return case


@pytest.fixture
def client(backend: BackendCase) -> Iterator[fencelock.Client]:
    with fencelock.connect(backend.url) as c:
        yield c


@pytest.fixture
def other(backend: BackendCase) -> Iterator[fencelock.Client]:
    """A second, independent client of the same backend."""
    with fencelock.connect(backend.url) as c:
        yield c


@pytest.fixture
def name() -> str:
    return f"contract/{secrets.token_hex(4)}"
