"""The goals each scenario is held to, as ratios."""

from __future__ import annotations

import math
from collections.abc import Sequence

from harness.rounds import RateResult
from harness.stats import ratio
from harness.tables import Target, at_least, at_most, fmt_number, fmt_ratio

from redisbench.contended import ContendedResult
from redisbench.many_names import MANY_TTL, ManyNamesResult
from redisbench.redlock import RedlockResult


def targets(
    uncontended: list[RateResult],
    contended: list[ContendedResult],
    up: list[RedlockResult],
    down: list[RedlockResult],
    many: Sequence[ManyNamesResult] = (),
) -> list[Target]:
    found: list[Target] = []
    rates = {r.key: r.rate for r in uncontended}
    if uncontended:
        ours = rates.get("fencelock")
        found += [
            at_least("1", "fencelock sync ÷ redis-py Lock",
                     ratio(ours, rates.get("redis-py")), 1.0, "x"),
            at_least("1", "fencelock sync ÷ raw SET NX loop",
                     ratio(ours, rates.get("raw-set-nx")), 0.95, "x"),
            at_least("1", "fencelock asyncio ÷ redis.asyncio Lock",
                     ratio(rates.get("fencelock-async"), rates.get("redis-py-async")), 1.0, "x"),
        ]  # fmt: skip
    by_key = {c.key: c for c in contended}
    ours_c = by_key.get("fencelock")
    if ours_c is not None:
        peer = by_key.get("python-redis-lock")
        ceiling = ratio(ours_c.ceiling_per_second, peer.sections_per_second if peer else None)
        found += [
            at_least("2", f"fencelock CS/s ÷ python-redis-lock (1/hold: {fmt_ratio(ceiling)})",
                     ratio(ours_c.sections_per_second, peer.sections_per_second if peer else None),
                     1.1, "x"),
            at_most("2", "fencelock handoff p50 (all handoffs)", float(ours_c.handoff_ms["p50"]),
                    0.3, " ms"),
            at_most("2", "fencelock handoff p50 (to another worker)",
                    float(ours_c.cross_handoff_ms["p50"]), 0.3, " ms"),
            at_most("2", "fencelock worst acquire wait", float(ours_c.acquire_wait_ms["max"]),
                    100, " ms"),
        ]  # fmt: skip
    fair = by_key.get("fencelock-fair")
    if fair is not None:
        met = None if math.isnan(fair.spread) else fair.spread <= 0.10
        found.append(
            Target("2", "fair=True: every worker within ±10% of the mean", "<= ±10%",
                   fmt_number(fair.spread, "±{:.1%}"), met)
        )  # fmt: skip
    up_rate = {r.key: r.cycles_per_second for r in up}
    for key, label in (("fencelock", "sync"), ("fencelock-async", "asyncio")):
        if up:
            found.append(
                at_least("3", f"fencelock {label} ÷ aioredlock (5 up)",
                         ratio(up_rate.get(key), up_rate.get("aioredlock")), 1.0, "x")
            )  # fmt: skip
        mine = next((r for r in down if r.key == key), None)
        if mine is not None:
            found.append(
                at_least("4", f"fencelock {label}: hung+killed ÷ all up",
                         ratio(mine.cycles_per_second, up_rate.get(key)), 0.5, "x")
            )  # fmt: skip
    for r in many:
        if r.label.endswith("redlock://"):
            found.append(
                at_most("5", f"fencelock redlock:// {r.api}: worst wait (ttl {MANY_TTL:g} s)",
                        float(r.wait_ms["max"]) / 1000, MANY_TTL / 5, " s")
            )  # fmt: skip
    return found
