"""What a check run shows while it runs: a live progress line, or nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(kw_only=True)
class Stats:
    """Running totals for the progress display."""

    acquisitions: int = 0
    accepted: int = 0
    stale: int = 0
    lost: int = 0
    faults: int = 0
    clients: int = 0
    crashes: int = 0


class Observer(Protocol):
    """Where a run reports its progress."""

    def started(self, duration: float) -> None: ...

    def update(self, elapsed: float, stats: Stats) -> None: ...

    def note(self, text: str) -> None: ...

    def finished(self) -> None: ...


class QuietObserver:
    """Reports nothing."""

    def started(self, duration: float) -> None:
        return None

    def update(self, elapsed: float, stats: Stats) -> None:
        return None

    def note(self, text: str) -> None:
        return None

    def finished(self) -> None:
        return None


class RichProgress:
    """A live line: elapsed / duration, acquisitions, writes, faults; each fault printed."""

    def __init__(self, console: object) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn

        assert isinstance(console, Console)
        self._progress = Progress(
            TextColumn("[bold]fencelock check[/]"),
            BarColumn(),
            TextColumn("{task.fields[clock]}"),
            TextColumn("{task.fields[stats]}"),
            console=console,
            transient=True,
        )
        self._task = self._progress.add_task("check", total=1.0, clock="", stats="")
        self._duration = 1.0

    def __enter__(self) -> RichProgress:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._progress.live.is_started:
            self._progress.stop()

    def started(self, duration: float) -> None:
        self._duration = duration
        self._progress.update(self._task, total=duration, completed=0)
        self._progress.start()  # only now: a run that fails to start prints one line

    def update(self, elapsed: float, stats: Stats) -> None:
        self._progress.update(
            self._task,
            completed=min(elapsed, self._duration),
            clock=f"{min(elapsed, self._duration):5.1f}/{self._duration:g}s",
            stats=(
                f"{stats.acquisitions} acquisitions · {stats.accepted} writes · "
                f"{stats.stale} stale rejected · {stats.lost} leases lost · "
                f"{stats.faults} faults"
            ),
        )

    def note(self, text: str) -> None:
        self._progress.console.print(f"  [magenta]⚡[/] {text}", highlight=False)

    def finished(self) -> None:
        self._progress.update(self._task, completed=self._duration)
