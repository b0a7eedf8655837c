"""Fail points: kill -9 the daemon at a named step, to test crash safety for real (not with a mock).

``TESSERAE_FAILPOINTS="after-place:2,after-signal"`` makes the process SIGKILL itself the 2nd time it
reaches ``after-place`` and the 1st time it reaches ``after-signal``. Unset (always, in production) a
fail point costs one dict lookup. The points are listed in docs/daemon.md ("Crash safety").
"""

from __future__ import annotations

import logging
import os
import signal
import threading

log = logging.getLogger(__name__)
ENV = "TESSERAE_FAILPOINTS"
POINTS = ("after-intent", "after-signal", "after-requeue", "after-place", "after-release")
_hits: dict[str, int] = {}
_count = threading.Lock()  # starts reach after-place from several threads


def _armed() -> dict[str, int]:
    spec = os.environ.get(ENV, "")
    out: dict[str, int] = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        name, _, n = item.partition(":")
        out[name] = int(n) if n.isdigit() else 1
    return out


def hit(name: str) -> None:
    armed = _armed()
    if name not in armed:
        return
    with _count:
        _hits[name] = n = _hits.get(name, 0) + 1
    if n == armed[name]:
        log.warning("fail point %s reached (hit %d): killing the daemon with SIGKILL", name, n)
        for h in logging.getLogger().handlers:
            h.flush()
        os.kill(os.getpid(), signal.SIGKILL)
