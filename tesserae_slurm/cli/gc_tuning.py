"""Garbage-collector settings for a long simulation or the daemon, set by the CLI around a run
(process-wide state is the program's to change, not the library's).

A simulation keeps its trace, profile memos and records alive for the whole run, while every round
allocates thousands of short-lived tuples. With CPython's default thresholds the young generations
are collected every 700 allocations and the long-lived heap is rescanned again and again. Freezing
what exists when the run starts (``gc.freeze``: the trace, the profile) and collecting the young
generation less often cut about 13% of the merged Philly run's CPU time on the development machine.
The daemon is alike: its rounds parse and rebuild every job of a big queue, and what it loaded at
start lives as long as it does. Reference cycles are still collected; the previous settings come back
on exit.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_THRESHOLD = 20_000  # allocations between young-generation collections (CPython's default: 700)


@contextmanager
def long_run_gc(young: int = YOUNG_THRESHOLD) -> Iterator[None]:
    old = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(young, old[0]), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()
