"""A dependency-free progress line on stderr (only when stderr is a terminal)."""

from __future__ import annotations

import sys
import time


class Bar:
    """``label [#####.....] done/total <unit> <text>``, redrawn at most every 0.1 s."""

    width = 30

    def __init__(self, label: str, unit: str, enabled: bool | None = None, label_width: int = 18) -> None:
        self.label, self.unit, self.label_width = label, unit, label_width
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._last = 0.0
        self.started = time.monotonic()

    def draw(self, done: int, total: int, text: str = "") -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < 0.1 and done < total:
            return
        self._last = now
        filled = int(self.width * done / max(1, total))
        sys.stderr.write(f"\r{self.label:<{self.label_width}} [{'#' * filled}{'.' * (self.width - filled)}] "
                         f"{done}/{total} {self.unit}  {text}")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()


class Progress(Bar):
    """The simulator's: jobs done and the simulated time (an ``on_round`` callback)."""

    def __init__(self, label: str, total: int, enabled: bool | None = None) -> None:
        super().__init__(label, "jobs", enabled)
        self.total = max(1, total)

    def __call__(self, sim_time: float, done: int, total: int) -> None:
        self.draw(done, total, f"t={sim_time / 3600:7.1f} h")
