"""Make the docs' pictures from real runs: the demo's timeline and a failing check report.

    .venv/bin/python scripts/docs_pictures.py [demo] [check]

Runs ``fencelock demo`` (two rounds on embedded SQLite, with SIGSTOP pauses) and
``fencelock check --no-fencing`` (8 clients, pauses and kills, on SQLite), and keeps the
SVG picture of each page as ``docs/images/demo-timeline.svg`` and
``docs/images/check-fail.svg``; name one to make that one only. The pictures are what
the product draws; run this again when the drawing changes.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "docs" / "images"
SVG = re.compile(r"<svg\b.*?</svg>", re.S)


def fencelock(*args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "from fencelock.cli import main; main()", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    print(done.stdout[-1500:])
    if done.returncode not in (0, 1):  # 1: check found the violation it was run to show
        raise SystemExit(f"fencelock {' '.join(args)} exited {done.returncode}:\n{done.stderr}")


def keep_svg(page: Path, name: str) -> None:
    found = SVG.search(page.read_text())
    if found is None:
        raise SystemExit(f"{page} has no <svg>")
    IMAGES.mkdir(parents=True, exist_ok=True)
    (IMAGES / name).write_text(found.group(0) + "\n")
    print(f"wrote docs/images/{name}")


def main() -> None:
    which = set(sys.argv[1:]) or {"demo", "check"}
    if not which <= {"demo", "check"}:
        raise SystemExit(f"usage: {sys.argv[0]} [demo] [check]")
    with tempfile.TemporaryDirectory() as tmp:
        demo, report = Path(tmp) / "demo", Path(tmp) / "report"
        if "demo" in which:
            fencelock("demo", "--out", str(demo))
            keep_svg(demo / "timeline.html", "demo-timeline.svg")
        if "check" not in which:
            return
        for seed in range(1, 10):  # a run without fencing that happens to lose nothing: again
            fencelock(
                "check", "--no-fencing", "--workload", "seats", "--clients", "6",
                "--duration", "6", "--nemesis", "pause,kill", "--seed", str(seed),
                "--report", str(report),
            )  # fmt: skip
            if not json.loads((report / "result.json").read_text())["ok"]:
                keep_svg(report / "report.html", "check-fail.svg")
                return
        raise SystemExit("no run failed: the picture of a failure needs one")


if __name__ == "__main__":
    main()
