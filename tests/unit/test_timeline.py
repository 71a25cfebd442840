"""The demo's timeline renderer: pure functions from a recorded trace to SVG/HTML."""

from __future__ import annotations

import dataclasses
import re
import xml.etree.ElementTree as ET

import pytest

from fencelock.demo import timeline
from fencelock.demo.model import Hold, Trace, WorkerPause, Wrote
from fencelock.toolkit import labels, scale

SVG = "{http://www.w3.org/2000/svg}"


def _trace(title: str = "Round 1: locks only") -> Trace:
    """Worker 2 is frozen holding token 2; worker 1 takes over with token 3 and sells seat 1."""
    return Trace(
        title=title,
        workers=3,
        start=100.0,
        end=103.0,
        note="each sale is a plain UPDATE of the seat",
        holds=(
            Hold(1, 1, 100.0, 100.1, asked=100.0),
            Hold(2, 2, 100.1, 101.5, lost=True, trusted_until=100.8, asked=100.0),
            Hold(1, 3, 100.9, 101.0, asked=100.2),
            Hold(3, 4, 101.1, 101.2, asked=100.2),
        ),
        pauses=(WorkerPause(2, 100.2, 101.4, token=2, seat=1),),
        writes=(
            Wrote(1, 0, 1, 100.05, "sold"),
            Wrote(1, 1, 3, 100.95, "sold"),
            Wrote(2, 1, 2, 101.45, "double"),
            Wrote(3, 2, 4, 101.15, "sold"),
        ),
        stats=(("seats sold", 3), ("sold twice", 1)),
    )


def _parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # noqa: S314 (the SVG fencelock drew)


def _with_class(root: ET.Element, cls: str) -> list[ET.Element]:
    return [e for e in root.iter() if cls in (e.get("class") or "").split()]


def test_svg_is_well_formed_xml() -> None:
    root = _parse(timeline.render_svg([_trace(), _trace("Round 2")]))
    assert root.tag == f"{SVG}svg"


def test_one_bar_per_lease_hold_in_every_panel() -> None:
    one, two = _trace(), _trace("Round 2")
    root = _parse(timeline.render_svg([one, two]))
    assert len(_with_class(root, "hold")) == len(one.holds) + len(two.holds)


def test_a_lost_lease_gets_a_ghost_after_its_safe_time() -> None:
    root = _parse(timeline.render_svg([_trace()]))
    ghosts = _with_class(root, "ghost")
    assert len(ghosts) == 1
    (lost_bar,) = [b for b in _with_class(root, "hold") if "token 2," in "".join(b.itertext())]
    # The solid bar stops where the lease stopped being safe; the ghost continues from there.
    ghost_x = float(ghosts[0].get("x", "nan"))
    bar_end = float(lost_bar.get("x", "nan")) + float(lost_bar.get("width", "nan"))
    assert ghost_x == pytest.approx(bar_end, abs=0.2)
    assert ghost_x < scale.Scale(100.0, 3.0 * 1.02).x(101.5)


def test_pauses_writes_and_links_are_marked() -> None:
    root = _parse(timeline.render_svg([_trace()]))
    assert len(_with_class(root, "pause")) == 1
    assert len(_with_class(root, "sold")) == 3
    assert len(_with_class(root, "double")) == 1
    assert len(_with_class(root, "rejected")) == 0
    assert len(_with_class(root, "link")) == 1  # the double sale points back at seat 1's sale


def test_rejected_write_is_marked_and_labelled() -> None:
    trace = _trace()
    writes = (*trace.writes[:2], Wrote(2, 1, 2, 101.45, "rejected"), trace.writes[3])
    svg = timeline.render_svg([dataclasses.replace(trace, writes=writes)])
    root = _parse(svg)
    assert len(_with_class(root, "rejected")) == 1
    assert len(_with_class(root, "double")) == 0
    assert "#2 rejected" in svg


def test_waiting_lines_only_for_holds_that_waited() -> None:
    root = _parse(timeline.render_svg([_trace()]))
    assert len(_with_class(root, "wait")) == 3  # the first hold was granted at once


def test_panels_share_one_time_scale() -> None:
    short = Trace("short", 1, 0.0, 1.0, holds=(Hold(1, 1, 0.0, 1.0),))
    long = Trace("long", 1, 50.0, 52.0, holds=(Hold(1, 2, 50.0, 52.0),))
    root = _parse(timeline.render_svg([short, long]))
    widths = [float(b.get("width", "nan")) for b in _with_class(root, "hold")]
    assert widths[1] == pytest.approx(2 * widths[0], rel=0.01)


def test_collided_with_finds_the_latest_earlier_accepted_sale_of_the_seat() -> None:
    first = Wrote(1, 5, 3, 1.0, "sold")
    rejected = Wrote(3, 5, 2, 1.5, "rejected")
    later = Wrote(2, 5, 4, 3.0, "double")
    stale = Wrote(4, 5, 1, 2.0, "rejected")
    writes = [first, rejected, stale, later]
    assert timeline.collided_with(stale, writes) is first
    assert timeline.collided_with(later, writes) is first
    assert timeline.collided_with(first, writes) is None


@pytest.mark.parametrize(
    ("span", "step"), [(1.0, 0.1), (3.9, 0.5), (8.0, 1.0), (25.0, 2.5), (120.0, 10.0)]
)
def test_tick_step_is_round_and_gives_a_readable_number_of_ticks(span: float, step: float) -> None:
    assert scale.tick_step(span) == pytest.approx(step)
    assert 5 <= span / scale.tick_step(span) <= 13


def test_axis_is_labelled_in_seconds() -> None:
    svg = timeline.render_svg([_trace()])
    labels = re.findall(r">([\d.]+) s</text>", svg)
    assert labels == ["0", "0.5", "1", "1.5", "2", "2.5", "3"]


def test_html_is_self_contained_and_escapes_text() -> None:
    page = timeline.render_html([_trace("Round <1> & co")], title="demo <b>")
    assert page.startswith("<!doctype html>")
    assert "<svg" in page
    assert "</svg>" in page
    assert "Round &lt;1&gt; &amp; co" in page
    assert "demo <b>" not in page
    assert not re.search(r"""(src|href)=["']https?:""", page)  # nothing fetched from outside
    # readable on a phone: the page fits the screen, the picture scrolls in its own box
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page
    assert "figure { overflow-x: auto; }" in page
    assert "figure > svg { min-width: 880px; }" in page


def test_empty_round_renders() -> None:
    root = _parse(timeline.render_svg([Trace("nothing happened", 2, 5.0, 5.0)]))
    assert _with_class(root, "hold") == []


def test_labels_in_one_row_are_spread_apart() -> None:
    first = labels.Label(1, 100.0, "seat 6 sold twice", "red")
    second = labels.Label(1, 110.0, "SIGSTOP 0.9s", "red")
    other_row = labels.Label(2, 105.0, "#7 rejected", "orange")
    placed = labels.spread([second, other_row, first])
    by_text = {label.text: label for label in placed}
    assert by_text["seat 6 sold twice"].x == 100.0
    assert by_text["SIGSTOP 0.9s"].x >= 100.0 + first.width
    assert by_text["#7 rejected"].x == 105.0


def test_callouts_near_the_right_edge_turn_left() -> None:
    trace = _trace()
    late = Wrote(2, 1, 2, trace.end, "double")
    labels = timeline.top_labels(
        dataclasses.replace(trace, writes=(late,), pauses=()),
        scale.Scale(trace.start, trace.end - trace.start),
    )
    (callout,) = labels
    assert callout.x + callout.width <= scale.WIDTH - scale.RIGHT
