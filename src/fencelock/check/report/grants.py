"""Each lease as the server granted it, drawn as a thin line under its client's bar.

The grant (the acquire's end) holds for the TTL; each renewal or ``extend()`` the
server granted (a ``renew`` op) moves the expiry to its request's start plus its
TTL. The line ends at the expiry, or at the release if that came first. Where the
client's bar runs on past it, the client believed in a lease the server no longer held.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from fencelock.check.checker import LeaseInterval
from fencelock.check.history import History
from fencelock.check.report.layout import MARKS, Layout
from fencelock.toolkit.palette import INK, MUTED

TTL_IN_DETAIL = re.compile(r"\bto (\d+(?:\.\d+)?)s\b")  # "to 0.734s"


@dataclass(frozen=True)
class ServerLease:
    """A lease on the server: granted at ``start`` until ``ttl_end``, extended by the
    renewals at ``renewals`` over ``extensions``, over at ``end`` (``expired``: by its TTL)."""

    start: float
    ttl_end: float
    renewals: tuple[float, ...]
    extensions: tuple[tuple[float, float], ...]
    end: float
    expired: bool


def run_ttl(history: History) -> float | None:
    """The run's lease TTL in seconds, if its parameters say."""
    ttl = history.params.get("ttl")
    return float(ttl) if isinstance(ttl, (int, float)) and ttl > 0 else None


def renewals(history: History, ttl: float) -> dict[tuple[int, int], list[tuple[float, float]]]:
    """(process, token) -> (request start, TTL) of each renewal or extension granted.

    From the ``renew`` ops; a history recorded before them has the ``extend`` calls only.
    """
    kind = "renew" if any(op.kind == "renew" for op in history.ops) else "extend"
    out: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for op in history.ops:
        if op.kind == kind and op.result == "ok" and op.token is not None:
            found = TTL_IN_DETAIL.search(op.detail)
            out.setdefault((op.process, op.token), []).append(
                (op.start, float(found.group(1)) if found else ttl)
            )
    return out


def granted(
    lease: LeaseInterval, renewed: Sequence[tuple[float, float]], ttl: float
) -> ServerLease:
    """What the server granted ``lease``: its TTL from the grant, then each renewal."""
    expiry = ttl_end = lease.start + ttl
    moments: list[float] = []
    extensions: list[tuple[float, float]] = []
    for at, span in sorted(renewed):
        if at < lease.start:
            continue
        if at >= expiry:  # expired before this request: not a renewal of this grant
            break
        moments.append(at)
        if at + span > expiry:
            extensions.append((expiry, at + span))
        expiry = at + span
    end = min(expiry, lease.end) if lease.fate == "released" else expiry
    return ServerLease(lease.start, ttl_end, tuple(moments), tuple(extensions), end, end == expiry)


def granted_line(lease: LeaseInterval, grant: ServerLease, lay: Layout) -> str:
    """The TTL's stretch (dark), each extension (grey), a tick per renewal, a cap at expiry."""
    y = lay.y(lease.process) + MARKS.bar / 2 + 3.5
    t0 = lay.scale.start

    def line(cls: str, a: float, b: float, colour: str, width: float = 2) -> str:
        x0, x1 = lay.x(min(a, grant.end)), lay.x(min(b, grant.end))
        return (
            f'<line class="{cls}" x1="{x0:.1f}" y1="{y:.1f}" x2="{x1:.1f}" y2="{y:.1f}" '
            f'stroke="{colour}" stroke-width="{width}"/>'
        )

    parts = [line("ttl", grant.start, grant.ttl_end, INK)]
    parts += [line("extension", a, b, MUTED) for a, b in grant.extensions]
    for at in (at for at in grant.renewals if at <= grant.end):
        x = lay.x(at)
        parts.append(
            f'<line class="renewal" x1="{x:.1f}" y1="{y - 3:.1f}" x2="{x:.1f}" y2="{y + 3:.1f}" '
            f'stroke="{INK}" stroke-width="1"/>'
        )
    if grant.expired and grant.end <= lay.end:
        x = lay.x(grant.end)
        parts.append(
            f'<line class="expiry" x1="{x:.1f}" y1="{y - 4:.1f}" x2="{x:.1f}" y2="{y + 4:.1f}" '
            f'stroke="{INK}" stroke-width="2"/>'
        )
    how = "expired" if grant.expired else "released"
    tip = (
        f"client {lease.process}, token {lease.token}: granted at {grant.start - t0:.3f}s for "
        f"{grant.ttl_end - grant.start:.2f}s, renewed {len(grant.renewals)} times, "
        f"{how} on the server at {grant.end - t0:.3f}s"
    )
    return f'<g class="granted"><title>{escape(tip)}</title>{"".join(parts)}</g>'
