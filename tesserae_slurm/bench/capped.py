"""Time one call in a child process that is killed at a cap (solvers without their own time limit).

cvxpy gives ECOS no time limit, so the Gavel-via-cvxpy baseline runs in a ``spawn``-ed child: the
child imports what it needs and builds its inputs first (not timed), says "ready", runs the timed
call and sends back its wall time, its result and its peak RSS. The parent waits ``cap_s`` after
"ready" and kills the child if no answer came; a kill reports the child's peak RSS read from /proc
just before. The timed call is a top-level function named "module:function" so that spawn can import it.
"""

from __future__ import annotations

import gc
import importlib
import multiprocessing as mp
import resource
import time
from dataclasses import dataclass
from typing import Any

START_TIMEOUT_S = 600.0  # imports + input setup in the child (never counted against the cap)
GRACE_S = 1.0  # the child's own timer starts after "ready" reaches the parent


@dataclass(frozen=True)
class CappedRun:
    ms: float | None  # the call's wall time in the child; None if killed at the cap or failed
    capped: bool  # killed at the cap
    result: Any  # what the call returned (None unless it finished)
    peak_rss_mib: float | None  # the child's peak resident memory (imports and inputs included)
    ready_rss_mib: float | None  # ... and its resident memory when the timed call started
    error: str = ""  # why there is no result, when not capped


def _vm_hwm_mib(pid: int | str) -> float | None:
    """Peak resident memory of this process image (/proc VmHWM, MiB); None off Linux."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except (OSError, ValueError, IndexError):
        pass
    return None


def _rss_mib() -> float:
    # Not getrusage's ru_maxrss: Linux carries the parent's peak across fork + exec, so a child of a
    # big parent would report the parent's memory. VmHWM belongs to the child's own image.
    hwm = _vm_hwm_mib("self")
    return hwm if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _resolve(target: str) -> Any:
    module, attr = target.split(":")
    return getattr(importlib.import_module(module), attr)


def _child(conn: Any, setup: str, call: str, args: Any) -> None:
    try:
        ctx = _resolve(setup)(args)
        fn = _resolve(call)
        gc.collect()
        conn.send(("ready", _rss_mib()))
        t0 = time.perf_counter()
        out = fn(ctx)
        ms = (time.perf_counter() - t0) * 1e3
        conn.send(("done", ms, out, _rss_mib()))
    except BaseException as exc:  # report any failure to the parent instead of dying silently
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def run_capped(setup: str, call: str, args: Any, cap_s: float,
               start_timeout_s: float = START_TIMEOUT_S) -> CappedRun:
    """``call(setup(args))`` timed in a fresh process; killed ``cap_s`` after it starts."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, setup, call, args), daemon=True)
    proc.start()
    pid = proc.pid
    assert pid is not None  # start() sets it
    child.close()
    ready_rss: float | None = None
    try:
        if not parent.poll(start_timeout_s):
            return CappedRun(None, False, None, _vm_hwm_mib(pid), None, "child did not start in time")
        msg = parent.recv()
        if msg[0] != "ready":
            return CappedRun(None, False, None, None, None, str(msg[1]))
        ready_rss = float(msg[1])
        if not parent.poll(cap_s + GRACE_S):
            return CappedRun(None, True, None, _vm_hwm_mib(pid), ready_rss)
        msg = parent.recv()
        if msg[0] != "done":
            return CappedRun(None, False, None, None, ready_rss, str(msg[1]))
        _, ms, out, peak = msg
        if ms > cap_s * 1e3:
            return CappedRun(None, True, None, float(peak), ready_rss)
        return CappedRun(float(ms), False, out, float(peak), ready_rss)
    except EOFError:
        proc.join(5.0)
        return CappedRun(None, False, None, None, ready_rss, f"child exited with code {proc.exitcode}")
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()
        parent.close()
