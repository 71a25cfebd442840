"""The pages people look at, in a real browser (headless Chromium): every page of the
docs site, served over HTTP as it would be, loads with no console error (all framed in
one page, one browser start; while the site loaded highlight.js from a CDN, offline every
page threw "hljs is not defined"), and
the demo's timeline page draws its picture (not blank, a lane per worker). Screenshots
stay in pytest's temporary directory, not in the repository."""

from __future__ import annotations

import functools
import http.server
import re
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fencelock.demo import timeline
from tests.chaos.test_report_browser import FLAGS, chromium, near, read_png
from tests.unit.test_timeline import _trace

CONSOLE = re.compile(r":CONSOLE(?::\d+)?\] \"(.*)\", source: (\S+)")
PHONE = (420, 900)


@pytest.fixture(scope="module")
def site(built_site: Path) -> Iterator[tuple[str, list[str]]]:
    """The docs site, served on a loopback port: its address and page paths."""
    built = built_site
    pages = sorted(
        ("/" + str(page.relative_to(built).parent).removeprefix(".") + "/").replace("//", "/")
        for page in built.rglob("index.html")
    )
    handler = functools.partial(FramedSite, directory=str(built), pages=pages)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", pages
    finally:
        server.shutdown()


EVERY_PAGE = "/__every_page__"


class FramedSite(http.server.SimpleHTTPRequestHandler):
    """The site's files, and at :data:`EVERY_PAGE` one page framing every page of it (a
    browser then loads them all at once, their console errors logged with their source).
    A subclass answers other paths of its own through :meth:`framing`."""

    def __init__(self, *args: Any, pages: list[str], **kwargs: Any) -> None:
        self.pages = pages  # set before the base class handles the request
        super().__init__(*args, **kwargs)

    def framing(self) -> str | None:
        """The HTML this request's path answers with, or None for a file of the site."""
        if self.path != EVERY_PAGE:
            return None
        frames = "".join(
            f'<iframe src="{page}" width="1280" height="900"></iframe>' for page in self.pages
        )
        return f"<!doctype html><html><body>{frames}</body></html>"

    def do_GET(self) -> None:
        html = self.framing()
        if html is None:
            super().do_GET()
            return
        body = html.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return None


def load(url: str, png: Path, profile: Path, window: tuple[int, int]) -> list[str]:
    """Load ``url``, screenshot it to ``png``; the errors its console logged (an
    uncaught exception, a resource that failed to load; not a script's own notes)."""
    done = subprocess.run(
        [
            str(chromium()),
            *FLAGS,
            "--disable-quic",
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            f"--screenshot={png}",
            f"--window-size={window[0]},{window[1]}",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert png.exists(), f"no screenshot of {url} (exit {done.returncode}):\n{done.stderr[-2000:]}"
    return [
        f"{text} ({source})"
        for text, source in CONSOLE.findall(done.stderr)
        if text.startswith("Uncaught") or "Error" in text or "Failed to load" in text
    ]


def test_every_docs_page_loads_with_no_console_error(
    site: tuple[str, list[str]], tmp_path: Path
) -> None:
    address, pages = site
    assert len(pages) > 20
    assert "/" in pages
    assert "/guide/" in pages
    png = tmp_path / "every-page.png"
    errors = load(address + EVERY_PAGE, png, tmp_path / "profile", (1280, 900))
    assert errors == [], "console errors:\n" + "\n".join(errors)


def test_a_docs_page_on_a_phone_is_drawn(site: tuple[str, list[str]], tmp_path: Path) -> None:
    address, _pages = site
    png = tmp_path / "phone.png"
    assert load(address + "/tutorials/seats/", png, tmp_path / "profile", PHONE) == []
    image = read_png(png.read_bytes())
    assert (image.width, image.height) == PHONE
    inked = sum(n for c, n in image.colours().items() if min(c) < 160)
    assert inked > 0.01 * image.width * image.height, "the page looks blank"


def test_the_demo_timeline_draws_a_lane_per_worker(tmp_path: Path) -> None:
    trace = _trace()
    page = tmp_path / "timeline.html"
    page.write_text(timeline.render_html([trace], title="demo"))
    lanes = re.findall(r'text-anchor="end">(worker \d+)<', page.read_text())  # row names
    assert lanes == [f"worker {n}" for n in range(1, trace.workers + 1)]
    for window in ((1400, 1000), PHONE):
        png = tmp_path / f"timeline-{window[0]}.png"
        assert load(page.as_uri(), png, tmp_path / "profile", window) == []
        image = read_png(png.read_bytes())
        colours = image.colours()
        assert len(colours) > 50, f"{window}: too few colours for a drawn timeline"
        assert near(colours, (0x3B, 0x6F, 0xB6)) > 100, f"{window}: no lease bars visible"


def search_results(url: str, profile: Path) -> list[str]:
    """The result links the docs' search shows for the page ``url`` (its ``?q=`` asked)."""
    done = subprocess.run(
        [
            str(chromium()),
            *FLAGS,
            f"--user-data-dir={profile}",
            "--virtual-time-budget=15000",  # the index loads and builds before the dump
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    results = re.search(r'<div id="mkdocs-search-results"[^>]*>(.*?)</div>', done.stdout, re.S)
    assert results is not None, f"no search results box in {url}:\n{done.stderr[-2000:]}"
    return re.findall(r'<article><h3><a href="([^"]+)"', results.group(1))


def test_the_docs_search_finds_pages_opened_from_disk(built_site: Path, tmp_path: Path) -> None:
    # (served over HTTP, search runs in the theme's worker, which a headless dump does
    # not wait for; the every-page test above loads that path with no console error)
    page = (built_site / "guide" / "index.html").as_uri()
    found = search_results(page + "?q=fencing", tmp_path / "profile")
    assert any("fencing/" in link for link in found), found
    assert search_results(page + "?q=zzzqqqnothing", tmp_path / "profile") == []
