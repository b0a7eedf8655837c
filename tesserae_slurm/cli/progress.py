"""A dependency-free progress line on stderr (only when stderr is a terminal)."""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, label: str, total: int, enabled: bool | None = None) -> None:
        self.label, self.total = label, max(1, total)
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._last = 0.0

    def __call__(self, sim_time: float, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < 0.1 and done < total:
            return
        self._last = now
        width = 30
        filled = int(width * done / self.total)
        sys.stderr.write(f"\r{self.label:<18} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} jobs"
                         f"  t={sim_time / 3600:7.1f} h")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()
