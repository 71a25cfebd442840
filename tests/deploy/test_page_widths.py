"""No docs page is wider than its window, on a phone (390 px) or a laptop (1,280 px), and
the top navigation keeps to one row on the laptop: measured in a real browser (headless
Chromium), every page framed at the window's width, its document's scroll width read by
a script. (A wide table scrolls in its own box; before, docs/choosing.md was 973 px wide
on a 390 px phone, and the navigation took three rows at 1,280 px.)"""

from __future__ import annotations

import functools
import http.server
import re
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chaos.test_report_browser import FLAGS, chromium
from tests.deploy.test_pages_in_a_browser import FramedSite

ONE_ROW = 60  # px: the navigation bar's height with its links on one row
_MEASURED = re.compile(r'<pre id="widths">(.*?)</pre>', re.S)
_SCRIPT = """<script>window.addEventListener('load', () => {
  const rows = [];
  for (const frame of document.querySelectorAll('iframe')) {
    const page = frame.contentDocument;
    const nav = page.querySelector('.navbar');
    rows.push([frame.dataset.page, page.documentElement.scrollWidth,
               nav ? Math.round(nav.getBoundingClientRect().height) : 0].join(' '));
  }
  const out = document.createElement('pre');
  out.id = 'widths';
  out.textContent = rows.join('\\n');
  document.body.appendChild(out);
});</script>"""


class _Framing(FramedSite):
    """The site's files, and at ``/__widths__?W`` every page framed ``W`` px wide."""

    def framing(self) -> str | None:
        if not self.path.startswith("/__widths__?"):
            return None
        width = int(self.path.partition("?")[2])
        frames = "".join(
            f'<iframe data-page="{page}" src="{page}" width="{width}" height="600" '
            'style="border:0"></iframe>'
            for page in self.pages
        )
        return f"<!doctype html><html><body>{frames}{_SCRIPT}</body></html>"


@pytest.fixture(scope="module")
def served(built_site: Path) -> Iterator[str]:
    pages = sorted(
        ("/" + str(page.relative_to(built_site).parent).removeprefix(".") + "/").replace("//", "/")
        for page in built_site.rglob("index.html")
    )
    handler = functools.partial(_Framing, directory=str(built_site), pages=pages)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def measured(address: str, width: int, profile: Path) -> dict[str, tuple[int, int]]:
    """Each page's document scroll width and navigation height, framed ``width`` px wide."""
    done = subprocess.run(
        [
            str(chromium()),
            *FLAGS,
            f"--user-data-dir={profile}",
            "--dump-dom",
            "--virtual-time-budget=30000",
            f"--window-size={width + 40},900",
            f"{address}/__widths__?{width}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    found = _MEASURED.search(done.stdout)
    assert found, f"no measurements (exit {done.returncode}):\n{done.stderr[-2000:]}"
    rows = [line.split() for line in found.group(1).splitlines()]
    return {page: (int(scroll), int(nav)) for page, scroll, nav in rows}


@pytest.mark.parametrize("width", [390, 1280])
def test_no_page_is_wider_than_its_window(served: str, tmp_path: Path, width: int) -> None:
    pages = measured(served, width, tmp_path / "profile")
    assert len(pages) > 20
    wide = {page: scroll for page, (scroll, _) in pages.items() if scroll > width}
    assert wide == {}
    if width == 1280:
        tall = {page: nav for page, (_, nav) in pages.items() if nav > ONE_ROW}
        assert tall == {}
