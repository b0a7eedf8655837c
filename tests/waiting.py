"""Waits for live tests: bounded by what they wait for, and saying what they saw when they fail.

A loaded 2-core CI machine outlasts any fixed sleep, so a live test polls for the state it needs
(`wait_for`) and, where it must show that something does *not* happen, watches the whole window
(`holds_for`) instead of sleeping and looking once. A CI log is all there is to read after a
failure, so both report the last value seen and, if given, `explain()`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(cond: Callable[[], T], timeout: float, what: str, tick: Callable[[], object] | None = None,
             every: float = 0.5, explain: Callable[[], str] | None = None) -> T:
    """Poll ``cond`` until it returns a truthy value, which is returned; call ``tick`` between polls (a
    daemon round, say). On timeout fail with ``what``, the last value ``cond`` returned and ``explain()``."""
    deadline = time.monotonic() + timeout
    while True:
        last = cond()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what} (last: {last!r})"
                                 + (f": {explain()}" if explain is not None else ""))
        if tick is not None:
            tick()
        time.sleep(every)


def holds_for(cond: Callable[[], object], seconds: float, what: str, every: float = 0.2,
              explain: Callable[[], str] | None = None) -> None:
    """``cond`` stays truthy for ``seconds`` (looked at every ``every`` s): fail at the first look where it
    does not, saying after how long, what it returned and ``explain()``."""
    t0 = time.monotonic()
    while True:
        got = cond()
        if not got:
            raise AssertionError(f"{what} stopped holding after {time.monotonic() - t0:.1f}s (got {got!r})"
                                 + (f": {explain()}" if explain is not None else ""))
        if time.monotonic() - t0 >= seconds:
            return
        time.sleep(every)
