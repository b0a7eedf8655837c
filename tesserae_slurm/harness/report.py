"""Job side of online feedback: a training loop reports its measured steps/s to the daemon.

The daemon tells a job where and how often to report in its assignment (``tesserae launch`` exports
``TESSERAE_REPORT_FILE`` and ``TESSERAE_REPORT_EVERY``); a payload that wants to help calls
``reporter.step()`` after every training step. Every ``every`` seconds one JSON line is appended:

    {"v": 1, "job": "1234", "round": 17, "t0": 1700000000.0, "t1": 1700000060.0, "steps": 118}

``round`` is the round whose assignment started this run (``TESSERAE_ROUND``). Only throughput is
reported: the daemon knows itself what the job ran with (model, strategy, partner, GPU type) and
checks every line against its own records (docs/profiling.md, "Online feedback"). The first window
of a run is not reported (warm-up: data loaders, cuDNN autotuning, a restored checkpoint), nor a
last window shorter than ``every``, nor a window in which the payload saw its partner change
(``reporter.restart()``). Only the first rank of a job reports. Stdlib only; a report that
cannot be written is logged once and never stops training.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

log = logging.getLogger(__name__)

REPORT_VERSION = 1
ENV_FILE, ENV_EVERY = "TESSERAE_REPORT_FILE", "TESSERAE_REPORT_EVERY"


class ThroughputReporter:
    def __init__(self, path: str | Path, every_s: float, job_id: str, round_id: int,
                 clock: Callable[[], float] = time.time, skip_first: bool = True) -> None:
        if not every_s > 0:
            raise ValueError(f"report interval must be > 0 s, got {every_s}")
        self.path, self.every, self.job, self.round = Path(path), float(every_s), str(job_id), int(round_id)
        self.clock, self.skip = clock, skip_first
        self.t0 = clock()
        self.steps = 0
        self.broken = False

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *, clock: Callable[[], float] = time.time,
                 skip_first: bool = True) -> ThroughputReporter | None:
        """The reporter the launcher asked for; None when feedback is off or this is not rank 0."""
        env = os.environ if env is None else env
        path, every = env.get(ENV_FILE), env.get(ENV_EVERY)
        if not path or not every or env.get("RANK", "0") != "0" or env.get("SLURM_PROCID", "0") != "0":
            return None
        try:
            return cls(path, float(every), env.get("SLURM_JOB_ID", ""), int(env.get("TESSERAE_ROUND", "0")),
                       clock, skip_first)
        except ValueError as exc:
            log.warning("throughput reports off: %s", exc)
            return None

    def step(self, n: int = 1) -> None:
        self.steps += n
        now = self.clock()
        if now - self.t0 < self.every:
            return
        if self.skip:
            self.skip = False
        else:
            self._write({"v": REPORT_VERSION, "job": self.job, "round": self.round, "t0": self.t0, "t1": now,
                         "steps": self.steps})
        self.t0, self.steps = now, 0

    def restart(self) -> None:
        """Drop the window in progress: what the job runs with changed within it (a partner's process
        arrived or left), so its rate would blend two speeds. The daemon knows a partner from the round
        that placed it, but the partner computes only once its own process is up, seconds later; a
        payload that sees the change itself reports only windows of one speed."""
        self.t0, self.steps = self.clock(), 0

    def _write(self, body: dict[str, object]) -> None:
        if self.broken:
            return
        line = (json.dumps(body, separators=(",", ":")) + "\n").encode()
        try:  # one append per line: a reader never sees two writers interleave within a line
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
        except OSError as exc:
            self.broken = True
            log.warning("cannot write throughput reports to %s (%s); training continues without them", self.path, exc)
