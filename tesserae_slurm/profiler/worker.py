"""Profiler workers: one process per job slot, so two packed jobs really run at the same time.

Two jobs "on the same device" are two processes sharing it, as packed jobs share a GPU (through MPS
when the runner started it). On CPU "the device" is a set of cores (``cores``, pinned with
``sched_setaffinity``; the runner's default is one core with one intra-op thread per job): packed
jobs time-share those cores as packed jobs time-share a GPU. More threads than cores would measure
OpenMP spin-waiting, not training. Workers are started once (``spawn``: a clean CUDA state per
process) and reused for every run.

A run, for one or two jobs: every worker builds its model and warms up, reports its peak memory
(``ready``); if all are ready and their sum fits under the memory cap, each job is measured alone
(``solo``), one after the other, and then both at once (``go``). A job that finishes its windows
keeps training (as load) until every job has finished, so each measured window of each job overlaps
its partner's training. The solo windows right before the pair are what the pair is normalized by:
a drift in background load between runs (a shared CI machine, thermal throttling) then does not
show up as interference. An out-of-memory error anywhere
makes the run infeasible; any other failure is an error, recorded (``--resume`` redoes it).
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnProcess
from typing import Any

from .measure import Protocol, accounted_peak_bytes, cuda_peak_bytes, is_out_of_memory, measure_windows
from .zoo import JobSpec, build_step

log = logging.getLogger(__name__)
OK, OOM, ERROR = "ok", "oom", "error"


# ---- child side --------------------------------------------------------------------------------

def serve(conn: Connection, device: str, threads: int, env: dict[str, str], cores: tuple[int, ...] = ()) -> None:
    """Worker main loop: one ``run`` message at a time until ``quit``."""
    os.environ.update(env)  # MPS pipe directory etc.: must precede CUDA initialization
    if cores and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, cores)
    import torch

    if threads > 0:
        torch.set_num_threads(threads)
    dev = torch.device(device)

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    conn.send(("up", os.getpid()))
    while True:
        msg = conn.recv()
        if msg[0] == "quit":
            return
        _, spec, protocol = msg
        _run_one(conn, spec, protocol, dev, sync)
        if dev.type == "cuda":
            torch.cuda.empty_cache()


def _fail(conn: Connection, exc: BaseException) -> None:
    kind = OOM if is_out_of_memory(exc) else ERROR
    text = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
    if kind == ERROR:
        log.debug("worker error: %s", traceback.format_exc())
    conn.send((kind, text))


def _run_one(conn: Connection, spec: JobSpec, protocol: Protocol, dev: Any, sync: Any) -> None:
    try:
        step, modules, opts = build_step(spec, dev)
        for _ in range(protocol.warmup_steps):
            step()
        peak = cuda_peak_bytes(step, dev) if dev.type == "cuda" else accounted_peak_bytes(step, modules, opts)
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which records it
        _fail(conn, exc)
        return
    conn.send(("ready", peak))
    while True:
        cmd = conn.recv()[0]
        if cmd not in ("solo", "go"):
            return  # "abort" / "done"
        try:
            rates = measure_windows(step, protocol, sync)
        except Exception as exc:  # noqa: BLE001
            _fail(conn, exc)
            return
        conn.send(("measured", rates))
        if cmd == "go":
            break
    try:
        while not conn.poll():
            step()  # keep the device busy until the partner has measured too
    except Exception:  # noqa: BLE001 - the measurement is done; only the load stops early
        pass
    conn.recv()  # "stop"
    conn.send(("stopped",))


# ---- parent side -------------------------------------------------------------------------------

@dataclass(frozen=True)
class RunOutcome:
    """What a run measured: per job, window rates (steps/s) and peak bytes."""

    status: str  # ok | oom | error
    rates: tuple[tuple[float, ...], ...] = ()
    peaks: tuple[int, ...] = ()
    message: str = ""
    solo: tuple[tuple[float, ...], ...] = ()  # pairs: each job's windows alone, just before


class WorkerDied(RuntimeError):
    pass


@dataclass
class _Slot:
    proc: SpawnProcess
    conn: Connection


class WorkerPool:
    """Two (or ``size``) persistent worker processes on one device; ``run`` one or two jobs."""

    def __init__(self, device: str = "cpu", threads: int = 0, env: dict[str, str] | None = None,
                 size: int = 2, cores: tuple[int, ...] = ()) -> None:
        self.device, self.threads, self.env, self.size = device, threads, dict(env or {}), size
        self.cores = tuple(cores)
        self._ctx = mp.get_context("spawn")  # a forked child would inherit CUDA state it cannot use
        self._slots: list[_Slot | None] = [None] * size
        self.started = 0  # worker processes started so far (tests check that resume starts none)

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _slot(self, i: int, timeout: float) -> _Slot:
        slot = self._slots[i]
        if slot is not None and slot.proc.is_alive():
            return slot
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(target=serve, args=(child, self.device, self.threads, self.env, self.cores),
                                 daemon=True, name=f"tesserae-profile-worker-{i}")
        proc.start()
        child.close()
        self.started += 1
        slot = _Slot(proc, parent)
        self._slots[i] = slot
        self._recv(slot, timeout)  # "up"
        return slot

    def _recv(self, slot: _Slot, timeout: float) -> tuple[Any, ...]:
        if not slot.conn.poll(timeout):
            raise WorkerDied(f"worker {slot.proc.name} did not answer within {timeout:g} s")
        try:
            reply: tuple[Any, ...] = slot.conn.recv()
            return reply
        except (EOFError, OSError) as exc:
            raise WorkerDied(f"worker {slot.proc.name} exited (code {slot.proc.exitcode})") from exc

    def _kill(self, i: int) -> None:
        slot = self._slots[i]
        self._slots[i] = None
        if slot is None:
            return
        slot.proc.terminate()
        slot.proc.join(10)
        slot.conn.close()

    def close(self) -> None:
        for i, slot in enumerate(self._slots):
            if slot is None:
                continue
            try:
                slot.conn.send(("quit",))
                slot.proc.join(10)
            except (OSError, ValueError):
                pass
            self._kill(i)

    def run(self, specs: Sequence[JobSpec], protocol: Protocol, cap_bytes: int | None = None) -> RunOutcome:
        """Measure ``specs`` (one job alone, or two packed) under ``protocol``."""
        if not 1 <= len(specs) <= self.size:
            raise ValueError(f"a run has 1..{self.size} jobs, got {len(specs)}")
        try:
            return self._run(specs, protocol, cap_bytes)
        except WorkerDied as exc:
            for i in range(len(specs)):
                self._kill(i)
            return RunOutcome(ERROR, message=str(exc))

    def _run(self, specs: Sequence[JobSpec], protocol: Protocol, cap_bytes: int | None) -> RunOutcome:
        t = protocol.timeout_s
        slots = [self._slot(i, t) for i in range(len(specs))]
        for slot, spec in zip(slots, specs):
            slot.conn.send(("run", spec, protocol))
        replies = [self._recv(s, t) for s in slots]
        peaks = tuple(int(r[1]) if r[0] == "ready" else 0 for r in replies)
        failed = [r for r in replies if r[0] != "ready"]
        over = cap_bytes is not None and sum(peaks) > cap_bytes and not failed
        if failed or over:
            for slot, r in zip(slots, replies):
                if r[0] == "ready":
                    slot.conn.send(("abort",))
            if over and cap_bytes is not None:
                mb = " + ".join(f"{p / 2**20:.1f}" for p in peaks)
                return RunOutcome(OOM, peaks=peaks, message=f"peak memory {mb} MiB > cap {cap_bytes / 2**20:.1f} MiB")
            kind = OOM if any(r[0] == OOM for r in failed) else ERROR
            return RunOutcome(kind, peaks=peaks, message="; ".join(str(r[1]) for r in failed))
        solo: list[tuple[float, ...]] = []
        for slot in slots:  # each job alone, right before the pair: the reference it is normalized by
            slot.conn.send(("solo",))
            r = self._recv(slot, t)
            if r[0] != "measured":
                for other in slots:
                    if other is not slot:
                        other.conn.send(("abort",))
                return RunOutcome(r[0] if r[0] in (OOM, ERROR) else ERROR, peaks=peaks, message=str(r[1]))
            solo.append(tuple(r[1]))
        if len(slots) == 1:
            slots[0].conn.send(("done",))
            return RunOutcome(OK, tuple(solo), peaks)
        for slot in slots:
            slot.conn.send(("go",))
        results = [self._recv(s, t) for s in slots]
        for slot, r in zip(slots, results):
            if r[0] == "measured":
                slot.conn.send(("stop",))
                self._recv(slot, t)  # "stopped"
        bad = [r for r in results if r[0] != "measured"]
        if bad:
            kind = OOM if any(r[0] == OOM for r in bad) else ERROR
            return RunOutcome(kind, peaks=peaks, message="; ".join(str(r[1]) for r in bad))
        return RunOutcome(OK, tuple(tuple(r[1]) for r in results), peaks, solo=tuple(solo))
