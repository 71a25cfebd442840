"""The check report: terminal table, JSON and the self-contained HTML page with its SVG."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest
from rich.console import Console

from fencelock.check.checker import CheckResult, check
from fencelock.check.history import History, Op
from fencelock.check.report.json_doc import to_json
from fencelock.check.report.layout import layout
from fencelock.check.report.page import render_html, write_html
from fencelock.check.report.terminal import terminal_table
from fencelock.toolkit.scale import LEFT, RIGHT, WIDTH
from tests.unit.test_checker import acq, final, lost, rel, simulate, stale, wr

SVG = "{http://www.w3.org/2000/svg}"
VOID = {"meta", "br", "img", "input", "link", "hr"}


def _paused_history() -> History:
    """Client 1 frozen past its TTL, client 2 takes over, client 1's late write is rejected."""
    ops = [
        acq(1, 1, 0.0),
        Op(1, "nemesis", 0.1, 2.1, "info", detail="pause client 1 for 2.0s"),
        acq(2, 2, 1.1, start=0.2),
        wr(2, 2, 1.2, 1),
        rel(2, 2, 1.3),
        stale(1, 1, 2.2),
        lost(1, 1, 2.3),
        Op(3, "acquire", 0.3, 2.3, "timeout"),
        Op(3, "nemesis", 2.4, 2.4, "info", detail="kill client 3"),
        Op(3, "crash", 2.4, 2.4, "info"),
        Op(-1, "nemesis", 2.5, 2.9, "info", detail="pause server redis-7001"),
        final(1, 3.0),
    ]
    return History(ops, {"workload": "register", "clients": 3, "ttl": 0.5, "fencing": True})


def _svg(html: str) -> ET.Element:
    match = re.search(r"<svg\b.*</svg>", html, re.S)
    assert match, "no inline SVG"
    return ET.fromstring(match.group(0))  # noqa: S314 (the SVG fencelock drew)


def _with_class(root: ET.Element, *classes: str) -> list[ET.Element]:
    return [e for e in root.iter() if set(classes) <= set((e.get("class") or "").split())]


class _Balance(HTMLParser):
    """Checks that every non-void tag is closed in order."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        pass

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()


def _report(history: History) -> tuple[CheckResult, str, ET.Element]:
    result = check(history)
    html = render_html(result, history)
    return result, html, _svg(html)


def test_html_is_balanced_and_the_svg_parses() -> None:
    history = simulate(seed=5, clients=6, duration=8.0, fencing=False, workload="seats")
    _, html, root = _report(history)
    parser = _Balance()
    parser.feed(html)
    parser.close()
    assert parser.errors == []
    assert parser.stack == []
    assert root.tag == f"{SVG}svg"
    assert html.startswith("<!doctype html>")
    assert "<script" not in html  # self-contained and inert
    assert 'name="viewport"' in html
    assert "figure > svg { min-width: 880px; }" in html
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "")


def test_one_bar_per_lease_and_one_marker_per_write_and_fault() -> None:
    history = simulate(seed=11, clients=8, duration=12.0, fencing=True, workload="register")
    result, _, root = _report(history)
    assert len(_with_class(root, "lease")) == len(result.leases) > 50
    writes = history.of_kind("write")
    assert len(_with_class(root, "write")) == len(writes)
    for outcome in ("accepted", "stale", "error"):
        expected = sum(1 for w in writes if w.result == outcome)
        assert len(_with_class(root, outcome)) == expected, outcome
    assert len(_with_class(root, "fault")) == len(history.of_kind("nemesis"))
    timeouts = [op for op in history.of_kind("acquire") if op.result == "timeout"]
    assert len(_with_class(root, "timeout")) == len(timeouts)


def test_small_history_is_drawn_where_it_happened() -> None:
    history = _paused_history()
    result, html, root = _report(history)
    assert result.ok
    assert len(_with_class(root, "lease")) == 2
    (ghost,) = _with_class(root, "ghost")  # client 1 believed on after token 2 was issued
    (overlap_1, overlap_2) = _with_class(root, "overlap")
    assert overlap_1.get("x") == overlap_2.get("x") == ghost.get("x")
    assert len(_with_class(root, "lost")) == 1
    (pause,) = _with_class(root, "client", "pause")
    assert "pause client 1" in "".join(pause.itertext())
    assert len(_with_class(root, "client", "kill")) == 1
    (server,) = _with_class(root, "server", "pause")
    server_box = server.find(f"{SVG}rect")
    assert server_box is not None
    assert float(server_box.get("x", 0)) > float(pause.get("x", 0))
    labels = ["".join(e.itertext()) for e in _with_class(root, "label")]
    assert "SIGSTOP 2.0s" in labels
    assert "kill -9" in labels
    assert "pause redis-7001" in labels
    assert "PASS" in html
    assert "rejected 1 stale write." in html


def test_violating_writes_are_red_crosses_and_listed() -> None:
    history = simulate(seed=3, clients=5, duration=10.0, fencing=False, workload="seats")
    result, html, root = _report(history)
    assert not result.ok
    marked = _with_class(root, "violation")
    assert len(marked) == len(result.violating_writes()) > 0
    assert 'class="verdict fail"' in html
    assert "sold twice" in html
    assert "<h2>Problems</h2>" in html


def test_token_labels_only_where_they_fit() -> None:
    ops = [acq(1, 7, 0.0), rel(1, 7, 9.0), acq(2, 8, 9.0), rel(2, 8, 9.02), final(0, 10.0)]
    _, _, root = _report(History(ops, {"workload": "register"}))
    assert ["".join(e.itertext()) for e in _with_class(root, "token")] == ["#7"]


def test_huge_tokens_are_shortened_to_their_last_digits() -> None:
    token = 1_718_000_000_123_456  # a counter seeded from the server's clock
    ops = [acq(1, token, 0.0), rel(1, token, 9.0), final(0, 10.0)]
    _, _, root = _report(History(ops, {"workload": "register"}))
    assert ["".join(e.itertext()) for e in _with_class(root, "token")] == ["#…3456"]


def test_labels_stay_inside_the_picture() -> None:
    ops = [acq(1, 1, 0.0), rel(1, 1, 9.99), final(0, 10.0)]
    ops += [
        Op(-1, "nemesis", 9.9, 10.0, "info", detail="clock +120s on server redis-7001"),
        Op(1, "nemesis", 9.95, 10.0, "info", detail="pause client 1 for 0.05s"),
    ]
    _, _, root = _report(History(ops, {"workload": "register"}))
    for label in _with_class(root, "label"):
        width = len("".join(label.itertext())) * 6.8
        assert float(label.get("x", 0)) + width <= WIDTH


def test_a_replacement_client_takes_the_killed_clients_row() -> None:
    detail = "kill client 3 (token 1): SIGKILL; replaced by client 9"
    ops = [
        acq(3, 1, 0.0),
        Op(3, "nemesis", 1.0, 1.0, "info", token=1, detail=detail),
        Op(3, "crash", 1.0, 1.0, "info", token=1),
        acq(4, 2, 1.6, start=0.1),
        rel(4, 2, 2.0),
        acq(9, 3, 2.1, start=1.2),
        rel(9, 3, 3.0),
        final(0, 3.1),
    ]
    _, html, root = _report(History(ops, {"workload": "register"}))
    rows = ["".join(e.itertext()) for e in _with_class(root, "row")]
    assert [r.split("clients")[0] for r in rows] == ["client 3", "client 4"]
    assert "then 9" in html
    ys = {e.get("y") for e in _with_class(root, "lease")}
    assert len(ys) == 2  # clients 3 and 9 share a row
    assert "16 client" not in html
    assert "3 client processes in 2 rows" in html


def test_server_fault_labels_are_short() -> None:
    detail = "clock of server redis-7001 stepped +1.00s (total +2.00s) while client 3 held token 1"
    ops = [acq(1, 1, 0.0), rel(1, 1, 9.0), Op(-1, "nemesis", 2.0, 2.0, "info", detail=detail)]
    _, html, root = _report(History([*ops, final(0, 10.0)], {"workload": "register"}))
    labels = ["".join(e.itertext()) for e in _with_class(root, "label")]
    assert labels == ["clock redis-7001 stepped +1.00s"]
    assert "while client 3 held token 1" in html  # the whole detail in the tooltip


def _renew(p: int, token: int, at: float, ttl: float = 0.5) -> Op:
    return Op(p, "renew", at, at + 0.001, "ok", token=token, detail=f"to {ttl:.3f}s")


def _x(line: ET.Element) -> tuple[float, float]:
    return float(line.get("x1", "nan")), float(line.get("x2", "nan"))


def test_each_lease_is_drawn_as_the_server_granted_it() -> None:
    """TTL 0.5 s: client 1 renewed at 0.2 and 0.4, then frozen (expires at 0.9, believes
    on to 2.3); client 2 released at 1.3, before its expiry at 1.6."""
    ops = [
        acq(1, 1, 0.0),
        _renew(1, 1, 0.2),
        _renew(1, 1, 0.4),
        acq(2, 2, 1.1, start=0.2),
        rel(2, 2, 1.3),
        lost(1, 1, 2.3),
        final(1, 3.0),
    ]
    history = History(ops, {"workload": "register", "ttl": 0.5})
    _, _, root = _report(history)
    x = layout(history).x
    granted = _with_class(root, "granted")
    assert len(granted) == 2  # one per lease
    first, second = granted
    (ttl,) = _with_class(first, "ttl")
    assert _x(ttl) == pytest.approx((x(0.0), x(0.5)), abs=0.06)
    spans = [end for e in _with_class(first, "extension") for end in _x(e)]
    assert spans == pytest.approx([x(0.5), x(0.7), x(0.7), x(0.9)], abs=0.06)
    ticks = [_x(e)[0] for e in _with_class(first, "renewal")]
    assert ticks == pytest.approx([x(0.2), x(0.4)], abs=0.06)
    (expiry,) = _with_class(first, "expiry")
    assert _x(expiry)[0] == pytest.approx(x(0.9), abs=0.06)
    assert "renewed 2 times, expired on the server at 0.900s" in "".join(first.itertext())
    (ttl,) = _with_class(second, "ttl")  # released first: the line ends at the release
    assert _x(ttl) == pytest.approx((x(1.1), x(1.3)), abs=0.06)
    assert not _with_class(second, "expiry")
    assert not _with_class(second, "extension")
    (pin,) = _with_class(root, "lost")  # the client believed on, long past the expiry
    assert _x(next(pin.iter(f"{SVG}line")))[0] == pytest.approx(x(2.3), abs=0.06)


def test_without_a_ttl_no_grant_is_drawn() -> None:
    ops = [acq(1, 1, 0.0), rel(1, 1, 1.0), final(1, 2.0)]
    _, _, root = _report(History(ops, {"workload": "register"}))
    assert _with_class(root, "lease")
    assert not _with_class(root, "granted")


def test_the_axis_spans_the_run_not_the_final_read() -> None:
    """The runner reads the resource after the clients stopped: long after the last event."""
    ops = [acq(1, 1, 1000.5, start=1000.0), wr(1, 1, 1002.0, 1), rel(1, 1, 1002.1)]
    history = History([*ops, final(1, 1060.0)], {"workload": "register", "ttl": 1.0})
    _, _, root = _report(history)
    waits = _with_class(root, "wait")
    assert float(waits[0].get("x1", 0)) == LEFT  # the first event at the left edge
    (write,) = _with_class(root, "write")
    right = WIDTH - RIGHT  # the release, 0.1 s after the write, is the last event
    assert right - 0.07 * (right - LEFT) < float(write.get("cx", 0)) < right
    ticks = [t.text or "" for t in root.iter(f"{SVG}text") if (t.text or "").endswith(" s")]
    assert ticks[0] == "0 s"
    assert ticks[-1] == "2 s"


def test_overlaps_and_lost_leases_are_told_apart() -> None:
    _, _, root = _report(_paused_history())
    bands, (pin,) = _with_class(root, "overlap"), _with_class(root, "lost")
    assert bands
    assert all(b.tag == f"{SVG}rect" for b in bands)
    assert {b.get("fill") for b in bands} == {"url(#overlap)"}
    pin_colours = {e.get("fill") or e.get("stroke") for e in pin if e.tag != f"{SVG}title"}
    band_colours = {b.get("stroke") for b in bands}
    assert pin_colours
    assert band_colours
    assert not pin_colours & band_colours
    assert pin.find(f"{SVG}path") is not None  # a pin's head, not a band
    legend = {"".join(t.itertext()) for t in root.iter(f"{SVG}text")}
    assert {"overlap: two believed at once", "client noticed its lease lost"} <= legend


def _seat_sold_twice() -> History:
    """Client 1 (token 1) reads seat 1 free and freezes; client 2 (token 2) sells it;
    client 1 wakes and sells it again: client 2's sale is lost."""
    ops = [
        acq(1, 1, 0.0),
        acq(2, 2, 0.8, start=0.1),
        wr(2, 2, 1.0, 1, key="seat:1"),
        rel(2, 2, 1.1),
        wr(1, 1, 2.0, 2, key="seat:1"),
        lost(1, 1, 2.1),
    ]
    return History(ops, {"workload": "seats", "ttl": 0.5, "fencing": False})


def test_a_fail_links_the_lost_write_to_the_write_that_overtook_it() -> None:
    result, _, root = _report(_seat_sold_twice())
    assert not result.ok
    x, y = layout(_seat_sold_twice()).x, layout(_seat_sold_twice()).y
    (ring,) = _with_class(root, "lost-write")
    assert (float(ring.get("cx", 0)), float(ring.get("cy", 0))) == pytest.approx(
        (x(1.001), y(2)), abs=0.06
    )
    (link,) = _with_class(root, "link")
    assert link.get("marker-end") == "url(#arrow)"
    start, *_, end = re.findall(r"(-?[\d.]+),(-?[\d.]+)", link.get("d", ""))
    assert tuple(map(float, start)) == pytest.approx((x(1.001), y(2)), abs=0.06)
    assert float(end[0]) < x(2.001)
    assert float(end[1]) == pytest.approx(y(1), abs=0.06)
    labels = ["".join(e.itertext()) for e in _with_class(root, "label")]
    assert "sale #2 lost" in labels
    assert "seat 1 sold twice" in labels
    assert root.find(f".//{SVG}marker[@id='arrow']") is not None
    legend = {"".join(t.itertext()) for t in root.iter(f"{SVG}text")}
    assert "lost write (overwritten)" in legend


def test_a_token_order_violation_is_linked_too_and_a_pass_has_no_link() -> None:
    ops = [acq(1, 1, 0.0), acq(2, 2, 0.8, start=0.1), wr(2, 2, 1.0, 1), rel(2, 2, 1.1)]
    ops += [wr(1, 1, 2.0, 2), lost(1, 1, 2.1), final(2, 3.0)]
    _, _, root = _report(History(ops, {"workload": "register", "ttl": 0.5}))
    assert len(_with_class(root, "link")) == len(_with_class(root, "lost-write")) == 1
    labels = ["".join(e.itertext()) for e in _with_class(root, "label")]
    assert "write #2 lost" in labels
    assert "#1 wrote after #2" in labels
    _, _, root = _report(_paused_history())
    assert not _with_class(root, "link")
    assert not _with_class(root, "lost-write")


def test_the_page_links_the_run_files_beside_it(tmp_path: Path) -> None:
    names = ["history-10.jsonl", "history-2.jsonl", "history-runner.jsonl", "result.json"]
    for name in [*names, "params.json", "client-2.log", "locks.db"]:
        (tmp_path / name).write_text("")
    history = _paused_history()
    html = write_html(check(history), history, tmp_path / "report.html").read_text()
    links = re.findall(r'<a href="([^"]+)">', html)
    assert links == [
        "result.json",
        "params.json",
        "history-2.jsonl",
        "history-10.jsonl",
        "history-runner.jsonl",
        "client-2.log",
    ]
    assert 'href="result.json"' not in render_html(check(history), history)  # none beside


def test_write_html_writes_the_page(tmp_path: Path) -> None:
    history = _paused_history()
    path = write_html(check(history), history, tmp_path / "report.html")
    assert path == tmp_path / "report.html"
    assert path.read_text(encoding="utf-8") == render_html(check(history), history)


def test_json_round_trips() -> None:
    history = simulate(seed=3, clients=4, duration=6.0, fencing=False, workload="seats")
    result = check(history)
    data = to_json(result, history)
    assert json.loads(json.dumps(data)) == data
    params = data["params"]
    assert isinstance(params, dict)
    assert params["seed"] == 3
    assert params["nemeses"] == list(history.params["nemeses"])  # type: ignore[call-overload]
    assert data["ok"] is False
    assert data["counts"] == data["result"]["counts"]  # type: ignore[index]
    assert data["result"]["overlap_count"] == result.overlap_count  # type: ignore[index]


def test_terminal_table_says_the_verdict_and_why() -> None:
    console = Console(record=True, width=140, color_system=None)
    history = simulate(seed=3, clients=4, duration=6.0, fencing=False, workload="seats")
    console.print(terminal_table(check(history), history))
    text = console.export_text()
    assert "FAIL" in text
    assert "sold twice" in text
    assert "acquisitions" in text
    console = Console(record=True, width=140, color_system=None)
    history = _paused_history()
    console.print(terminal_table(check(history), history))
    assert "PASS" in console.export_text()
