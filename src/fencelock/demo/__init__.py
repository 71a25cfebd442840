"""``fencelock demo``: why a lock needs a fencing token (Kleppmann's GC-pause argument).

Worker processes sell the seats of one show, each sale under the lock
``show/42``. Some workers are frozen (SIGSTOP) between reading a free seat and
selling it, for longer than the lease's TTL; the lock passes to another worker,
which sells the same seat. Round 1 uses the lock alone and the woken worker
sells the seat a second time; round 2 sends each sale through a fencing check
in the shop's own transaction, and the stale write is rejected.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fencelock.demo import timeline
from fencelock.demo.model import DemoError, Options, RoundResult, RoundSpec
from fencelock.demo.scenario import Reporter, run_round

__all__ = ["DemoError", "DemoResult", "Options", "Reporter", "RoundResult", "run_demo"]


@dataclass(frozen=True)
class DemoResult:
    """Both rounds and the path of the timeline picture."""

    rounds: tuple[RoundResult, ...]
    html: Path

    def problems(self) -> list[str]:
        """What went against the script; empty when the demo made its point."""
        unfenced, fenced = self.rounds
        found = []
        if unfenced.sold_twice == 0:
            found.append(
                "round 1 (locks only) sold no seat twice: the pauses did not expose the hazard"
            )
        if fenced.sold_twice:
            found.append(
                f"round 2 (locks + fencing) sold {fenced.sold_twice} seat(s) twice: "
                "the fence let a stale write through"
            )
        if fenced.seats_sold != fenced.seats:
            found.append(f"round 2 sold {fenced.seats_sold} of {fenced.seats} seats")
        return found

    def as_dict(self) -> dict[str, object]:
        """The JSON form."""
        return {
            "rounds": [r.as_dict() for r in self.rounds],
            "html": str(self.html),
            "ok": not self.problems(),
            "problems": self.problems(),
        }


def validate(options: Options) -> None:
    """Raise DemoError for options the scenario cannot play."""
    if options.workers < 2:
        raise DemoError("--workers must be at least 2: someone has to take over the lock")
    if options.seats < 1:
        raise DemoError("--seats must be at least 1")
    if options.pauses < 0:
        raise DemoError("--pauses must be 0 or more")
    if not 0.05 <= options.ttl <= 5:
        raise DemoError("--ttl must be between 0.05 and 5 seconds")


def run_demo(options: Options, reporter: Reporter) -> DemoResult:
    """Play both rounds under ``options.out`` and write the timeline next to them."""
    validate(options)
    out = options.out.resolve()
    specs = (
        RoundSpec(1, "locks only", False, out / "round-1"),
        RoundSpec(2, "locks + fencing", True, out / "round-2"),
    )
    rounds = tuple(run_round(spec, options, reporter) for spec in specs)
    html = out / "timeline.html"
    html.write_text(timeline.render_html([r.trace for r in rounds]), encoding="utf-8")
    return DemoResult(rounds, html)
