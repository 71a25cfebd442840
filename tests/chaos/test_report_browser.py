"""The check report in a real browser: headless Chromium screenshots it; the pixels are checked.

The page is rendered from a synthetic history of 8 clients over 30 s (hundreds of
leases, pauses, partitions, kills, server faults). The screenshot must have the
window's size, be far from blank, and show the colours that carry meaning: lease
bars, accepted writes and the verdict banner (green PASS or red FAIL with red
crosses). The PNG is decoded with ``zlib`` alone.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from fencelock.check.checker import check
from fencelock.check.report.page import write_html
from tests.unit.test_checker import simulate

CHROMIUM = Path("/usr/bin/chromium")
WINDOW = (1400, 1000)
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)

HOLD = (0x3B, 0x6F, 0xB6)  # lease bars
SOLD = (0x16, 0xA3, 0x4A)  # accepted writes
RED = (0xDC, 0x26, 0x26)  # violating writes, SIGSTOP labels
PASS_BG = (0xEC, 0xFD, 0xF5)
FAIL_BG = (0xFE, 0xF2, 0xF2)


def chromium() -> Path:
    """The browser; installed with apt-get when missing and we are root, else the test skips."""
    found = shutil.which("chromium") or (str(CHROMIUM) if CHROMIUM.exists() else None)
    if found is None and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", "chromium"],  # noqa: S607 (apt-get from PATH, as root installs it)
            env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"),
            capture_output=True,
            timeout=1800,
            check=False,
        )
        found = shutil.which("chromium") or (str(CHROMIUM) if CHROMIUM.exists() else None)
    if found is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return Path(found)


def screenshot(page: Path, png: Path, profile: Path) -> Path:
    """Render ``page`` in headless Chromium at the window size and save the screenshot."""
    width, height = WINDOW
    done = subprocess.run(
        [
            str(chromium()),
            *FLAGS,
            f"--user-data-dir={profile}",
            f"--screenshot={png}",
            f"--window-size={width},{height}",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert png.exists(), f"no screenshot (exit {done.returncode}):\n{done.stderr[-2000:]}"
    return png


@dataclass(frozen=True)
class Image:
    """A decoded 8-bit RGB or RGBA PNG: rows of raw pixel bytes."""

    width: int
    height: int
    channels: int
    rows: tuple[bytes, ...]

    def colours(self) -> Counter[tuple[int, int, int]]:
        """How many pixels have each RGB colour."""
        n = self.channels
        tally: Counter[tuple[int, int, int]] = Counter()
        for row in self.rows:
            tally.update(zip(row[0::n], row[1::n], row[2::n], strict=True))
        return tally


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from the IHDR chunk, after checking the signature."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def read_png(data: bytes) -> Image:
    """Decode a non-interlaced 8-bit RGB/RGBA PNG (what Chromium writes)."""
    width, height = png_size(data)
    depth, colour_type, _, _, interlace = struct.unpack(">BBBBB", data[24:29])
    assert (depth, interlace) == (8, 0), "unsupported PNG"
    assert colour_type in (2, 6), "unsupported PNG"
    channels = 3 if colour_type == 2 else 4
    pos, idat = 8, bytearray()
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        if data[pos + 4 : pos + 8] == b"IDAT":
            idat += data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    raw = zlib.decompress(bytes(idat))
    stride = width * channels
    assert len(raw) == height * (stride + 1), "truncated image data"
    rows, prior = [], bytes(stride)
    for y in range(height):
        start = y * (stride + 1)
        row = _unfilter(raw[start], bytearray(raw[start + 1 : start + 1 + stride]), prior, channels)
        rows.append(row)
        prior = row
    return Image(width, height, channels, tuple(rows))


def _unfilter(kind: int, line: bytearray, prior: bytes, bpp: int) -> bytes:
    if kind == 1:  # Sub
        for x in range(bpp, len(line)):
            line[x] = (line[x] + line[x - bpp]) & 0xFF
    elif kind == 2:  # Up
        line = bytearray((a + b) & 0xFF for a, b in zip(line, prior, strict=True))
    elif kind == 3:  # Average
        for x in range(len(line)):
            left = line[x - bpp] if x >= bpp else 0
            line[x] = (line[x] + (left + prior[x]) // 2) & 0xFF
    elif kind == 4:  # Paeth
        for x in range(len(line)):
            a = line[x - bpp] if x >= bpp else 0
            c = prior[x - bpp] if x >= bpp else 0
            line[x] = (line[x] + _paeth(a, prior[x], c)) & 0xFF
    return bytes(line)


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def near(colours: Counter[tuple[int, int, int]], rgb: tuple[int, int, int], tol: int = 10) -> int:
    """Pixels within ``tol`` of ``rgb`` in every channel."""
    return sum(
        n for c, n in colours.items() if all(abs(v - w) <= tol for v, w in zip(c, rgb, strict=True))
    )


@pytest.fixture(scope="module")
def blank_png(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A screenshot of an empty page, to compare against."""
    directory = tmp_path_factory.mktemp("blank")
    page = directory / "blank.html"
    page.write_text("<!doctype html><html><body></body></html>")
    return screenshot(page, directory / "blank.png", directory / "profile").read_bytes()


@pytest.mark.parametrize(
    ("fencing", "workload"), [(True, "seats"), (False, "register")], ids=["fenced", "unfenced"]
)
def test_report_renders_in_chromium(
    tmp_path: Path, blank_png: bytes, fencing: bool, workload: str
) -> None:
    history = simulate(seed=7, clients=8, duration=30.0, fencing=fencing, workload=workload)
    result = check(history)
    assert result.ok == fencing
    assert len(result.leases) > 200
    page = write_html(result, history, tmp_path / "report.html")

    png = screenshot(page, tmp_path / "report.png", tmp_path / "profile")
    print(f"screenshot: {png}")
    data = png.read_bytes()
    assert png_size(data) == WINDOW
    assert len(data) > 5 * len(blank_png)

    blank = read_png(blank_png).colours()
    assert len(blank) <= 2, "the blank page is not blank: the comparison means nothing"

    image = read_png(data)
    colours = image.colours()
    pixels = image.width * image.height
    inked = sum(n for c, n in colours.items() if min(c) < 160)
    assert inked > 0.02 * pixels, f"only {inked} dark pixels: the page looks blank"
    assert len(colours) > 500, "too few distinct colours for a drawn timeline"
    assert near(colours, HOLD) > 300, "no lease bars visible"
    assert near(colours, SOLD) > 300, "no accepted writes visible"
    green, pink = near(colours, PASS_BG, tol=3), near(colours, FAIL_BG, tol=3)
    if fencing:
        assert green > 20_000 > pink, "no green PASS banner"
    else:
        assert pink > 20_000 > green, "no red FAIL banner"
        assert near(colours, RED) > 300, "no red violation markers"
