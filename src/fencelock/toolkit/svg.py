"""The SVG both timelines are drawn with: the document, its patterns, the axis, rows and marks.

Each mark's markup is written here once. The demo draws a few roomy rows and the
check report many thin ones, so each draws its marks with a :class:`MarkStyle` of its
own sizes (:data:`ROOMY`, :data:`THIN`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html import escape

from fencelock.toolkit.palette import FONT, GHOST, GRID, HOLD, INK, MUTED, PAPER, STRIPE, WAIT
from fencelock.toolkit.scale import LEFT, RIGHT, WIDTH, Scale, tick_step

ARROW = """<marker id="arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7"
 orient="auto-start-reverse"><path d="M0,0 L8,4 L0,8 z" fill="context-stroke"/></marker>"""
LEGEND_COLUMN = 250


def document(height: float, label: str, parts: Iterable[str]) -> str:
    """The ``<svg>`` element, ``WIDTH`` wide: ``parts`` in order, empty ones left out."""
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height:.0f}" '
        f'width="{WIDTH}" height="{height:.0f}" font-family="{escape(FONT)}" '
        f'role="img" aria-label="{escape(label)}">\n'
        + "\n".join(p for p in parts if p)
        + "\n</svg>"
    )


def defs(*patterns: str) -> str:
    """The ``<defs>`` of ``patterns`` (and markers), then the white background."""
    background = f'<rect width="100%" height="100%" fill="{PAPER}"/>'
    return "<defs>\n" + "\n".join(patterns) + f"\n</defs>\n{background}"


def hatch(
    name: str,
    colour: str,
    *,
    size: float,
    fill_opacity: float,
    stroke_width: float,
    stroke_opacity: float,
    angle: int = 45,
) -> str:
    """A pattern of diagonal ``colour`` stripes on a faint wash of it, ``url(#name)``."""
    return (
        f'<pattern id="{name}" width="{size}" height="{size}" patternUnits="userSpaceOnUse"\n'
        f' patternTransform="rotate({angle})"><rect width="{size}" height="{size}" '
        f'fill="{colour}" fill-opacity="{fill_opacity}"/>\n'
        f'<line x1="0" y1="0" x2="0" y2="{size}" stroke="{colour}" stroke-width="{stroke_width}" '
        f'stroke-opacity="{stroke_opacity}"/>\n</pattern>'
    )


def axis(scale: Scale, top: float, bottom: float) -> str:
    """The time axis along ``bottom``, in seconds, with dotted grid lines up to ``top``."""
    step = tick_step(scale.span)
    parts = [
        f'<line x1="{LEFT}" y1="{bottom}" x2="{WIDTH - RIGHT}" y2="{bottom}" stroke="{MUTED}"/>'
    ]
    for i in range(int(scale.span / step + 1e-9) + 1):
        seconds = i * step
        x = scale.x(scale.start + seconds)
        parts.append(
            f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" stroke="{GRID}" '
            f'stroke-dasharray="2 3"/>\n'
            f'<line x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 5}" stroke="{MUTED}"/>'
            f'\n<text x="{x:.1f}" y="{bottom + 18}" font-size="11" fill="{MUTED}" '
            f'text-anchor="middle">{seconds:g} s</text>'
        )
    return "\n".join(parts)


def stripe(index: int, y: float, height: float) -> str:
    """The background of row ``index`` (from 0): shaded and white in turn."""
    fill = STRIPE if index % 2 == 0 else PAPER
    return (
        f'<rect x="{LEFT}" y="{y:.1f}" width="{WIDTH - LEFT - RIGHT}" height="{height:.1f}" '
        f'fill="{fill}"/>'
    )


def row_label(
    text: str, y: float, *, size: float = 13, colour: str = INK, cls: str = "", tip: str = ""
) -> str:
    """A row's name in the left margin, right-aligned, its baseline at ``y``."""
    title = f"<title>{escape(tip)}</title>" if tip else ""
    return (
        f'<text{_class(cls)} x="{LEFT - 12}" y="{y:.1f}" font-size="{size}" fill="{colour}" '
        f'text-anchor="end">{escape(text)}{title}</text>'
    )


def legend(items: Sequence[tuple[str, str]], top: float, row: float, size: float) -> str:
    """(swatch, label) pairs in four columns from ``top``, ``row`` pixels apart.

    Each swatch is drawn around (0, 0) in a 26 x 16 box; its label follows it.
    """
    parts = []
    for i, (swatch, label) in enumerate(items):
        x, y = LEFT + (i % 4) * LEGEND_COLUMN, top + (i // 4) * row
        parts.append(
            f'<g transform="translate({x},{y})">{swatch}<text x="34" y="4.5" '
            f'font-size="{size}" fill="{INK}">{escape(label)}</text></g>'
        )
    return "\n".join(parts)


@dataclass(frozen=True, kw_only=True)
class MarkStyle:
    """The sizes one picture draws its marks with, and the marks."""

    bar: float  # a lease bar's height
    corner: float  # a bar's corner radius
    ghost_stroke: float
    ghost_dash: str
    box_stroke: float  # the outline of a hatched fault box
    dot: float  # an accepted write's radius
    dot_ring: float
    cross: float  # a bad write's radius
    cross_ring: float
    cross_arm: float  # the arms of its white x, as a fraction of its radius
    cross_stroke: float
    token_size: float  # the font size of ``#token`` in a bar
    wait_cap: str = ""  # the ends of a waiting line: "" (square) or "round"

    def bar_rect(self, cls: str, x0: float, x1: float, y: float, tip: str) -> str:
        """A solid lease bar from ``x0`` to ``x1``, its top at ``y``."""
        return (
            f'<rect class="{cls}" x="{x0:.1f}" y="{y:.1f}" width="{x1 - x0:.1f}" '
            f'height="{self.bar:g}" rx="{self.corner:g}" fill="{HOLD}">'
            f"<title>{escape(tip)}</title></rect>"
        )

    def ghost_rect(self, x0: float, x1: float, y: float, tip: str = "") -> str:
        """The dashed rest of a bar: the lease was gone, its holder did not know."""
        head = (
            f'<rect class="ghost" x="{x0:.1f}" y="{y + 0.75:.1f}" width="{max(x1 - x0, 0):.1f}" '
            f'height="{self.bar - 1.5:g}" rx="{self.corner:g}" fill="{GHOST}" stroke="{HOLD}" '
            f'stroke-width="{self.ghost_stroke:g}" stroke-dasharray="{self.ghost_dash}"'
        )
        return f"{head}><title>{escape(tip)}</title></rect>" if tip else f"{head}/>"

    def wait_line(
        self, x0: float, x1: float, y: float, *, cls: str = "wait", tip: str = "", dash: str = ""
    ) -> str:
        """The thin line of a client waiting for the lock."""
        head = (
            f'<line{_class(cls)} x1="{x0:.1f}" y1="{y:.1f}" x2="{x1:.1f}" y2="{y:.1f}" '
            f'stroke="{WAIT}" stroke-width="2"'
            + (f' stroke-linecap="{self.wait_cap}"' if self.wait_cap else "")
            + (f' stroke-dasharray="{dash}"' if dash else "")
        )
        return f"{head}><title>{escape(tip)}</title></line>" if tip else f"{head}/>"

    def box(
        self,
        cls: str,
        *,
        x0: float,
        x1: float,
        y: float,
        height: float,
        fill: str,
        colour: str,
        tip: str,
    ) -> str:
        """A fault's box on a row (a pause, a partition), filled with a pattern."""
        return (
            f'<rect class="{cls}" x="{x0:.1f}" y="{y:.1f}" width="{max(x1 - x0, 1.5):.1f}" '
            f'height="{height}" fill="{fill}" stroke="{colour}" '
            f'stroke-width="{self.box_stroke:g}" rx="2"><title>{escape(tip)}</title></rect>'
        )

    def dot_mark(self, cls: str, x: float, y: float, colour: str, tip: str) -> str:
        """A write that went through: a small disc."""
        return (
            f'<circle class="{cls}" cx="{x:.1f}" cy="{y:.1f}" r="{self.dot:g}" fill="{colour}" '
            f'stroke="{PAPER}" stroke-width="{self.dot_ring:g}"><title>{escape(tip)}</title>'
            "</circle>"
        )

    def cross_mark(
        self, cls: str, x: float, y: float, colour: str, tip: str, r: float | None = None
    ) -> str:
        """A bad write: a white x in a ``colour`` disc (radius ``r``, else the style's)."""
        r = self.cross if r is None else r
        a = r * self.cross_arm
        return (
            f"<g{_class(cls)}><title>{escape(tip)}</title>"
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:g}" fill="{colour}" stroke="{PAPER}" '
            f'stroke-width="{self.cross_ring:g}"/>'
            f'<path d="M{x - a:.1f},{y - a:.1f} L{x + a:.1f},{y + a:.1f} M{x + a:.1f},{y - a:.1f} '
            f'L{x - a:.1f},{y + a:.1f}" stroke="{PAPER}" stroke-width="{self.cross_stroke:g}" '
            'stroke-linecap="round"/></g>'
        )

    def token(
        self,
        text: str,
        x: float,
        y: float,
        *,
        cls: str = "",
        fill: str = PAPER,
        halo: str = HOLD,
        anchor: str = "",
    ) -> str:
        """``#token`` on a bar, haloed so it reads over bars and hatching alike."""
        align = f' text-anchor="{anchor}"' if anchor else ""
        return (
            f'<text{_class(cls)} x="{x:.1f}" y="{y:.1f}" font-size="{self.token_size:g}" '
            f'font-weight="700" fill="{fill}" stroke="{halo}" stroke-width="2.5" '
            f'paint-order="stroke"{align}>{escape(text)}</text>'
        )


# The demo's few roomy rows, and the check report's many thin ones.
ROOMY = MarkStyle(
    bar=18,
    corner=3,
    ghost_stroke=1.5,
    ghost_dash="4 3",
    box_stroke=1.2,
    dot=4.5,
    dot_ring=1.5,
    cross=8,
    cross_ring=1.5,
    cross_arm=0.4375,
    cross_stroke=2.2,
    token_size=11,
    wait_cap="round",
)
THIN = MarkStyle(
    bar=12,
    corner=2,
    ghost_stroke=1.3,
    ghost_dash="4 2.5",
    box_stroke=1.1,
    dot=2.6,
    dot_ring=0.9,
    cross=6.5,
    cross_ring=1.2,
    cross_arm=0.45,
    cross_stroke=1.8,
    token_size=10.5,
)


def _class(cls: str) -> str:
    return f' class="{cls}"' if cls else ""
