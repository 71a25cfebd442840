"""``fencelock demo`` end to end: real worker processes, real SIGSTOP pauses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

FENCELOCK = Path(sys.executable).parent / "fencelock"

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the demo freezes workers with SIGSTOP"
)


def _demo(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(FENCELOCK), "demo", "--out", str(out), *args],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    out = tmp_path_factory.mktemp("demo")
    args = ("--workers", "3", "--seats", "10", "--pauses", "2", "--ttl", "0.3", "--json")
    done = _demo(out, *args)
    assert done.returncode == 0, done.stderr + done.stdout
    return json.loads(done.stdout), out


def test_locks_alone_sell_seats_twice(small_run: tuple[Any, Path]) -> None:
    result, _ = small_run
    unfenced = result["rounds"][0]
    assert unfenced["fenced"] is False
    assert unfenced["pauses"] == 2
    assert unfenced["sold_twice"] > 0
    assert unfenced["sales"] == unfenced["seats_sold"] + unfenced["sold_twice"]
    assert unfenced["stale_rejected"] == 0


def test_fencing_rejects_every_stale_write(small_run: tuple[Any, Path]) -> None:
    result, _ = small_run
    fenced = result["rounds"][1]
    assert fenced["fenced"] is True
    assert fenced["sold_twice"] == 0
    assert fenced["stale_rejected"] > 0
    assert fenced["stale_rejected"] == fenced["pauses"]
    assert fenced["seats_sold"] == fenced["sales"] == fenced["seats"] == 10
    assert result["ok"] is True
    assert result["problems"] == []


def test_frozen_workers_notice_their_lost_leases(small_run: tuple[Any, Path]) -> None:
    result, _ = small_run
    for played in result["rounds"]:
        assert played["leases_lost"] >= played["pauses"]


def test_writes_an_html_timeline_with_an_svg(small_run: tuple[Any, Path]) -> None:
    result, out = small_run
    html = Path(result["html"])
    assert html == out.resolve() / "timeline.html"
    page = html.read_text(encoding="utf-8")
    assert "<svg" in page
    assert page.count('class="pause"') == sum(r["pauses"] for r in result["rounds"])
    assert page.count('class="write double"') == result["rounds"][0]["sold_twice"]
    assert page.count('class="write rejected"') == result["rounds"][1]["stale_rejected"]


def test_human_output_is_a_table(tmp_path: Path) -> None:
    done = _demo(tmp_path, "--workers", "2", "--seats", "4", "--pauses", "1", "--ttl", "0.2")
    assert done.returncode == 0, done.stderr
    assert "sold twice" in done.stdout
    assert "locks + fencing" in done.stdout
    assert f"Timeline: {tmp_path.resolve() / 'timeline.html'}" in done.stdout


def test_fails_clearly_when_round_one_shows_no_hazard(tmp_path: Path) -> None:
    done = _demo(tmp_path, "--workers", "2", "--seats", "3", "--pauses", "0", "--ttl", "0.2")
    assert done.returncode == 1
    assert "round 1 (locks only) sold no seat twice" in done.stderr


def test_rejects_a_single_worker(tmp_path: Path) -> None:
    done = _demo(tmp_path, "--workers", "1")
    assert done.returncode != 0
    assert "--workers" in done.stderr
