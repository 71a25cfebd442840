"""The pages a release ships stand on their own: no link or path that leaves the
repository (a sibling checkout, a design note that is not shipped, a machine's absolute
path) and no word of how they were made ("session 3", "issue 25", "stop 4")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PAGES = [
    *(ROOT / name for name in ("README.md", "CHANGELOG.md", "CONTRIBUTING.md", "SECURITY.md")),
    *sorted((ROOT / "docs").rglob("*.md")),
    ROOT / "bench" / "README.md",
]
# Named places outside the repository: the shared folder beside it, the design note it
# was built from, the absolute path of a working tree.
OUTSIDE = re.compile(r"\.\./shared\b|\bDESIGN\.md\b|(?<![\w.~-])/work/")
# Numbered provenance only: "an issue tracker" and "the session timeout" are English.
PROVENANCE = re.compile(r"\b(?:session|issue|stop)\s+#?\d+", re.IGNORECASE)
# A Markdown link's target or an inline image's: [text](target "title").
LINK = re.compile(r"\]\(\s*<?([^)\s>]+)")


def problems(page: Path, root: Path = ROOT) -> list[str]:
    """What on ``page`` points outside ``root`` or tells how the page was made, each as
    ``line N: text``."""
    found = []
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        hits = [m.group(0) for m in OUTSIDE.finditer(line)]
        hits += [m.group(0) for m in PROVENANCE.finditer(line)]
        for target in LINK.findall(line):
            if re.match(r"[a-z][a-z0-9+.-]*:|#", target, re.IGNORECASE):
                continue  # a URL with a scheme (https:, mailto:) or an anchor on the page
            path = target.split("#", 1)[0]
            resolved = (page.parent / path).resolve()
            if path.startswith("/") or not resolved.is_relative_to(root.resolve()):
                hits.append(target)
        found += [f"line {number}: {hit}" for hit in hits]
    return found


def test_every_page_is_there() -> None:
    missing = [page.relative_to(ROOT).as_posix() for page in PAGES if not page.is_file()]
    assert missing == []


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_shipped_page_stands_on_its_own(page: Path) -> None:
    assert problems(page) == [], f"{page.relative_to(ROOT)} points outside or tells its making"


@pytest.mark.parametrize(
    "line",
    [
        "See [the design](../shared/research/backend-clients.md).",
        "As DESIGN.md says, the owner is random.",
        "The log is in /work/main/tmp/run.log.",
        "Measured in session 15, after the change.",
        "Session 16 stepped ZooKeeper.",
        "Issue 25 set the targets.",
        "the issue #24 framing",
        "at stop 3 of the plan",
        "[up and out](../../elsewhere/page.md)",
        "[rooted](/etc/passwd)",
    ],
)
def test_a_page_with_one_such_reference_fails(tmp_path: Path, line: str) -> None:
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "page.md"
    page.write_text(f"# A page\n\nAll fine here.\n{line}\n", encoding="utf-8")
    assert len(problems(page, root=tmp_path)) == 1


@pytest.mark.parametrize(
    "line",
    [
        "Report it in an issue tracker; the session timeout is 10 s.",
        "A SIGSTOP 2.3s pause, then stop the server.",
        "[Safety](safety.md#mutation-testing), [bench](../bench/README.md), [top](#a-page)",
        "[Redis](https://redis.io/docs/) and the `~/work/` folder of a user",
    ],
)
def test_ordinary_english_and_inner_links_pass(tmp_path: Path, line: str) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "README.md").write_text("# Bench\n", encoding="utf-8")
    page = tmp_path / "docs" / "page.md"
    page.write_text(f"# A page\n\n{line}\n", encoding="utf-8")
    assert problems(page, root=tmp_path) == []
