"""An emulated GPU job for the dev cluster's fake GPUs: it sleeps, and progresses as the profile says.

    python -m tesserae_slurm.devcluster.emulated_job --out DIR --work W [--speeds FILE --key KEY]
        [--scale S] [--restart-s R] [--registry DIR] [--tick T] [--checkpoint-s C]

EMULATION, not training: no torch, no GPU; a job is a sleeping process whose *work* (seconds of its
work alone on the reference GPU, the trace's ``duration``) grows by ``scale x speed`` per wall second,
so 64 or more run on two cores. Its speed is what the profile gives for what it runs with now, as the
simulator's truth does (``devcluster/emulation.py`` writes the table from ``profiles/speeds.py``):

* alone: its speed alone under its strategy (``TESSERAE_STRATEGY``; the best one when none);
* beside another job on its GPUs: the pair's speed under MPS when both are clients of one MPS server
  (the launcher's ``CUDA_MPS_PIPE_DIRECTORY``: one server per user, node and GPU set, as
  ``harness/mps.py`` keeps them), else the pair's time-sliced speed (two users' jobs, or a job that
  is no MPS client); a pair the profile does not know runs time-sliced at the table's fallback share;
* split over nodes: as alone -- the simulator charges a job its profile speed for its GPU count
  wherever its GPUs are, and so does the emulation.

It learns who shares its GPUs as a GPU would: every emulated job registers, for each physical GPU it
holds (``TESSERAE_GPUS``, else Slurm's ``SLURM_JOB_GPUS`` / ``CUDA_VISIBLE_DEVICES``), a file
``<registry>/<node>/gpu<i>/<job>.json`` naming its profile key, strategy and MPS server, and reads
the others; entries of dead processes are ignored. A job that joins or leaves GPUs wakes the jobs
already there through their FIFO (``<registry>/<node>/wake/<job>``), so a partner's arrival slows a
job at once rather than at its next tick. Without ``--speeds`` it runs at 1.0 whatever shares its
GPUs (fake GPUs that do no work: `tesserae devcluster compare`).

Checkpoint protocol (docs/daemon.md "Job side"): it resumes its work from ``DIR/ckpt-<job>.json``,
loses ``--restart-s`` seconds of trace time on a resume (checkpoint load and warm-up, as the
simulator's restart cost), and on the checkpoint signal (USR1) or TERM saves its work (taking ``C``
wall seconds, as a real checkpoint takes time) and exits; under the daemon `tesserae launch` forwards
the signal, records that the payload exited after it (a stop record: the daemon ends the stop then
rather than after the grace) and outlives it until the requeue-hold. Every run
appends JSON events to ``DIR/events-<job>.jsonl``: ``start``, ``speed`` (each change, with the
partner and how they share), ``checkpoint`` and ``done``, each with its wall time and work. With
online feedback on it reports its throughput (``harness/report.py``): one emulated step is one
second of reference work.

Stdlib only (no numpy): started once per run of every job, on a loaded two-core machine; the runs copy
this file beside their jobs and run it as a script, so it is the same payload whichever checkout's
daemon and launcher run it (`tesserae bench responsive --checkout`).
"""

from __future__ import annotations

import argparse
import errno
import json
import math
import os
import select
import signal
import stat
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FORMAT = "tesserae-emulated-speeds/1"
MPS, TIMESLICE = "mps", "timeslice"
DEFAULT_REGISTRY = "/tmp/tesserae-emulated-gpus"
REGISTRY_ENV = "TESSERAE_EMULATED_GPUS"

_stop = False


def _on_signal(_signum: int, _frame: object) -> None:
    global _stop
    _stop = True


# ---- the speed table ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Option:
    a_strategy: str
    b_strategy: str
    a_speed: float
    b_speed: float


class SpeedTable:
    """What ``emulation.speed_table`` wrote: speeds alone per key and strategy, pair options per way
    of sharing. Keys are profile keys as text (``model|batch|gpus``); strategy "" is the best one."""

    def __init__(self, raw: Mapping[str, Any]) -> None:
        if raw.get("format") != FORMAT:
            raise ValueError(f"not an emulated-speeds table (format {raw.get('format')!r}, expected {FORMAT})")
        self.share = float(raw["timeslice_share"])
        self.alone: dict[str, dict[str, float]] = {k: {str(s): float(v) for s, v in d.items()}
                                                   for k, d in raw["alone"].items()}
        self.pairs: dict[tuple[str, str, str], list[Option]] = {}
        for sharing, rows in raw["pairs"].items():
            for r in rows:
                opt = Option(r["a_strategy"], r["b_strategy"], float(r["a_speed"]), float(r["b_speed"]))
                self.pairs.setdefault((sharing, r["a"], r["b"]), []).append(opt)
                if r["a"] != r["b"] or (opt.a_strategy, opt.a_speed) != (opt.b_strategy, opt.b_speed):
                    back = Option(opt.b_strategy, opt.a_strategy, opt.b_speed, opt.a_speed)
                    self.pairs.setdefault((sharing, r["b"], r["a"]), []).append(back)

    @classmethod
    def load(cls, path: str | Path) -> SpeedTable:
        return cls(json.loads(Path(path).read_text()))

    def solo(self, key: str, strategy: str = "") -> float:
        runs = self.alone.get(key)
        if runs is None:
            raise ValueError(f"key {key!r} is not in the speed table")
        return runs.get(strategy, runs[""])

    def packed(self, key: str, strategy: str, partner: str, partner_strategy: str, sharing: str) -> float:
        """This job's speed beside ``partner``: the option of exactly these strategies where the
        table has it, else the best (by speed sum) of those that agree with what is known; a pair
        the table lacks runs time-sliced at the fallback share."""
        options = [o for o in self.pairs.get((sharing, key, partner), []) if o.a_speed > 0 and o.b_speed > 0]
        fits = [o for o in options if (not strategy or o.a_strategy in ("", strategy))
                and (not partner_strategy or o.b_strategy in ("", partner_strategy))]
        if not fits:
            if options:  # the pair does not fit in memory under these strategies: it would crash
                return 0.0
            return self.solo(key, strategy) * self.share
        return max(fits, key=lambda o: o.a_speed + o.b_speed).a_speed


# ---- the emulated GPUs: who shares mine ----------------------------------------------------------------

@dataclass(frozen=True)
class Occupant:
    job: str
    pid: int
    key: str
    strategy: str
    mps_server: str  # CUDA_MPS_PIPE_DIRECTORY: one server per user, node and GPU set ("" = no MPS client)

    def to_json(self) -> dict[str, Any]:
        return {"job": self.job, "pid": self.pid, "key": self.key, "strategy": self.strategy,
                "mps_server": self.mps_server}


def sharing_with(me: Occupant, other: Occupant) -> str:
    """Two clients of one MPS server run at once; anything else time-slices the GPU."""
    return MPS if me.mps_server and me.mps_server == other.mps_server else TIMESLICE


def speed_now(table: SpeedTable | None, me: Occupant, others: Sequence[Occupant]) -> tuple[float, str, str]:
    """(speed, partner job or "", sharing or "") for what shares my GPUs now."""
    if table is None:
        return 1.0, (others[0].job if others else ""), ""
    if not others:
        return table.solo(me.key, me.strategy), "", ""
    other = others[0]  # the daemon puts at most two jobs on a GPU
    how = sharing_with(me, other)
    return table.packed(me.key, me.strategy, other.key, other.strategy, how), other.job, how


class Registry:
    """One file per (GPU, job) under ``<base>/<node>/gpu<i>/``: the emulated GPUs' occupants; and
    one FIFO per job under ``<base>/<node>/wake/`` that others write to when they join or leave."""

    def __init__(self, base: str | Path, node: str, gpus: Sequence[int]) -> None:
        root = Path(base) / (node or "node")
        self.dirs = [root / f"gpu{g}" for g in gpus]
        self.wake_dir = root / "wake"
        self.mine: list[Path] = []
        self.wake_fd = -1

    def join(self, me: Occupant) -> None:
        _mkdir_shared(self.wake_dir)
        fifo = self.wake_dir / me.job
        try:
            if not stat.S_ISFIFO(fifo.stat().st_mode):
                fifo.unlink()
                os.mkfifo(fifo)
        except FileNotFoundError:
            os.mkfifo(fifo)
        # read and write: a FIFO with no writer left would read as always ready (end of file)
        self.wake_fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
        body = json.dumps(me.to_json())
        for d in self.dirs:
            _mkdir_shared(d)
            tmp = d / f".{me.job}.{me.pid}.tmp"
            tmp.write_text(body)
            tmp.replace(d / f"{me.job}.json")
            self.mine.append(d / f"{me.job}.json")
        self._wake(self.others(me))

    def leave(self, me: Occupant) -> None:
        for p in self.mine:
            p.unlink(missing_ok=True)
        self.mine = []
        self._wake(self.others(me))
        if self.wake_fd >= 0:
            os.close(self.wake_fd)
            self.wake_fd = -1
            (self.wake_dir / me.job).unlink(missing_ok=True)

    def _wake(self, others: Sequence[Occupant]) -> None:
        for o in others:
            try:
                fd = os.open(self.wake_dir / o.job, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # gone, or nobody reading it
                continue
            try:
                os.write(fd, b"x")
            except OSError as exc:
                if exc.errno != errno.EAGAIN:  # full: it has been woken already
                    raise
            finally:
                os.close(fd)

    def sleep(self, seconds: float) -> None:
        """Sleep up to ``seconds``; less when another job joins or leaves these GPUs."""
        if self.wake_fd < 0:
            time.sleep(seconds)
            return
        ready, _, _ = select.select([self.wake_fd], [], [], seconds)
        if ready:
            try:
                while os.read(self.wake_fd, 4096):
                    pass
            except BlockingIOError:
                pass

    def others(self, me: Occupant) -> list[Occupant]:
        seen: dict[str, Occupant] = {}
        for d in self.dirs:
            for f in sorted(d.glob("*.json")) if d.is_dir() else ():
                try:
                    o = Occupant(**json.loads(f.read_text()))
                except (OSError, ValueError, TypeError):
                    continue  # being replaced, or a torn write: read again next tick
                if o.job == me.job or o.job in seen or not _alive(o.pid):
                    continue
                seen[o.job] = o
        return list(seen.values())


def _mkdir_shared(d: Path) -> None:
    """Make ``d`` and what is missing above it writable by every user, sticky as /tmp: two users' jobs
    share the emulated GPUs, and each removes only its own entries."""
    missing = []
    while not d.exists():
        missing.append(d)
        d = d.parent
    for m in reversed(missing):
        try:
            m.mkdir()
        except FileExistsError:
            continue  # another job made it: its maker set the mode
        m.chmod(0o1777)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def my_gpus(env: Mapping[str, str]) -> list[int]:
    """Physical GPU indices: the daemon's (``TESSERAE_GPUS``), else Slurm's."""
    for name in ("TESSERAE_GPUS", "SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES"):
        text = env.get(name, "").strip()
        if text:
            try:
                return [int(x) for x in text.split(",") if x.strip()]
            except ValueError:
                continue
    return []


# ---- progress ------------------------------------------------------------------------------------------

def advance(work: float, total: float, speed: float, scale: float, wall_s: float) -> float:
    """Work after ``wall_s`` wall seconds at ``speed`` (capped at ``total``)."""
    return min(total, work + max(0.0, speed) * scale * max(0.0, wall_s))


def wall_to_finish(work: float, total: float, speed: float, scale: float) -> float:
    return math.inf if speed <= 0 else max(0.0, (total - work) / (speed * scale))


def log_event(path: Path, event: str, **fields: Any) -> None:
    env = os.environ
    body = {
        "event": event, "time": time.time(), "job": env.get("SLURM_JOB_ID", ""),
        "restart": int(env.get("SLURM_RESTART_COUNT", "0") or 0), "nodelist": env.get("SLURM_JOB_NODELIST", ""),
        "num_nodes": int(env.get("SLURM_JOB_NUM_NODES", "1") or 1), "gpus": env.get("TESSERAE_GPUS", "")
        or env.get("CUDA_VISIBLE_DEVICES", ""), **fields,
    }
    with path.open("a") as fh:
        fh.write(json.dumps(body) + "\n")


def _save(ckpt: Path, work: float) -> None:
    tmp = ckpt.with_suffix(".tmp")
    tmp.write_text(json.dumps({"work": work}))
    tmp.replace(ckpt)


def main(argv: Sequence[str] | None = None) -> int:
    signal.signal(signal.SIGUSR1, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    p = argparse.ArgumentParser(prog="python -m tesserae_slurm.devcluster.emulated_job",
                                description="an emulated GPU job (emulation: sleeps; no GPU, no training)")
    p.add_argument("--out", required=True, type=Path, help="checkpoints and events")
    p.add_argument("--work", required=True, type=float, help="seconds of work alone on the reference GPU")
    p.add_argument("--speeds", type=Path, default=None, help="emulated-speeds table (none: always 1.0)")
    p.add_argument("--key", default="", help="this job's profile key in the table (model|batch|gpus)")
    p.add_argument("--scale", type=float, default=1.0, help="work seconds per wall second at speed 1.0")
    p.add_argument("--restart-s", type=float, default=0.0, help="work-time seconds lost on each resume")
    p.add_argument("--registry", default=None, help=f"the emulated GPUs' occupants (default ${REGISTRY_ENV} "
                                                    f"or {DEFAULT_REGISTRY})")
    p.add_argument("--tick", type=float, default=1.0,
                   help="wall seconds between looks at the GPUs when nobody joins or leaves them (1.0)")
    p.add_argument("--checkpoint-s", type=float, default=0.0,
                   help="wall seconds a checkpoint on the signal takes (default 0)")
    a = p.parse_args(argv)
    if not (a.work > 0 and a.scale > 0 and a.tick > 0 and a.restart_s >= 0 and a.checkpoint_s >= 0):
        p.error("--work, --scale and --tick must be > 0 and --restart-s and --checkpoint-s >= 0")
    table = SpeedTable.load(a.speeds) if a.speeds is not None else None
    if table is not None:
        table.solo(a.key)  # an unknown key fails here, before the job counts as started
    env = os.environ
    job = env.get("SLURM_JOB_ID", "x")
    ckpt, events = a.out / f"ckpt-{job}.json", a.out / f"events-{job}.jsonl"
    work = float(json.loads(ckpt.read_text())["work"]) if ckpt.exists() else 0.0
    resumed = ckpt.exists()
    me = Occupant(job, os.getpid(), a.key, env.get("TESSERAE_STRATEGY", ""), env.get("CUDA_MPS_PIPE_DIRECTORY", ""))
    registry = Registry(a.registry or env.get(REGISTRY_ENV) or DEFAULT_REGISTRY, env.get("SLURMD_NODENAME", ""),
                        my_gpus(env))
    registry.join(me)
    from tesserae_slurm.harness.report import ThroughputReporter  # stdlib only; None unless the daemon asked

    reporter = ThroughputReporter.from_env()
    log_event(events, "start", work=work, resumed=resumed, emulated=True)
    print(f"emulated GPU job {job} (emulation: it sleeps, no GPU work): {a.key or 'speed 1.0'}, work "
          f"{work:g} of {a.work:g} s, scale {a.scale:g}, GPUs {','.join(map(str, my_gpus(env))) or '-'}"
          f"{', resumed' if resumed else ''}", file=sys.stderr, flush=True)
    try:
        work = _run(a, table, me, registry, events, work, resumed, reporter)
    finally:
        registry.leave(me)
    done = work >= a.work
    if not done:
        time.sleep(a.checkpoint_s)
    _save(ckpt, work)
    log_event(events, "done" if done else "checkpoint", work=work)
    return 0


def _run(a: argparse.Namespace, table: SpeedTable | None, me: Occupant, registry: Registry, events: Path,
         work: float, resumed: bool, reporter: Any) -> float:
    """Sleep the warm-up of a resume, then progress until the work is done or a signal stops it."""
    warmup_until = time.monotonic() + (a.restart_s / a.scale if resumed else 0.0)
    last = time.monotonic()
    speed, partner, how = -1.0, "", ""
    reported = math.floor(work)
    while work < a.work and not _stop:
        now = time.monotonic()
        computing_since = max(last, warmup_until)
        if now > computing_since and speed > 0:
            work = advance(work, a.work, speed, a.scale, now - computing_since)
        last = now
        if reporter is not None and math.floor(work) > reported:
            reporter.step(math.floor(work) - reported)
            reported = math.floor(work)
        if work >= a.work:
            break
        new = speed_now(table, me, registry.others(me))
        if new != (speed, partner, how):
            if reporter is not None and speed >= 0:  # no report blends the speeds before and after
                reporter.restart()
            speed, partner, how = new
            log_event(events, "speed", work=work, speed=speed, partner=partner, sharing=how)
        wait = a.tick
        if now >= warmup_until:
            wait = min(wait, wall_to_finish(work, a.work, speed, a.scale))
        else:
            wait = min(wait, warmup_until - now)
        registry.sleep(max(wait, 0.001))
    now = time.monotonic()
    if _stop and now > max(last, warmup_until) and speed > 0:
        work = advance(work, a.work, speed, a.scale, now - max(last, warmup_until))
    return work


if __name__ == "__main__":
    raise SystemExit(main())
