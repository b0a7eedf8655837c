"""`tesserae launch -- CMD ...`: the job-side half of a placement.

Runs inside the batch script: reads the daemon's assignment, pins CUDA_VISIBLE_DEVICES to the chosen
GPU indices (Slurm's own choice is overridden on purpose: the daemon is the GPU arbiter), makes every
packable job a client of its user's per-GPU MPS server (``harness/mps.py``), adds torchrun / Megatron
arguments, tells the payload where to report its throughput (``harness/report.py``), and forwards the
checkpoint signal to the payload.

Signals are never lost (the batch shell's side is in jobscripts/, see docs/daemon.md "Job side"): the
shell traps them on its first line and appends each to ``$TESSERAE_SIGNAL_FILE``; the launcher starts
with them ignored, installs its handlers, then reads that file. The payload starts with the
checkpoint signal ignored, and gets it as soon as one of its processes catches it (``/proc``), so a
payload that is still importing its libraries is not killed by it. After a checkpoint signal the
launcher outlives the payload (up to ``--requeue-wait`` seconds) until the daemon's requeue-hold
ends the job: a job that exits by itself has really ended. Meanwhile it records that the payload has
exited (``harness/stop_record.py``), so the daemon requeue-holds the job at once instead of waiting out
the grace.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from ..model import InputError
from ..model.strategy import parse_strategy
from .assignment import EVERY_KEY, REPORTS_KEY, STOPS_KEY, Assignment, from_scontrol_oneliner
from .megatron import megatron_parallelism
from .mps import MpsSetup, join_mps, leave_mps
from .report import ENV_EVERY, ENV_FILE
from .stop_record import StopRecord

log = logging.getLogger(__name__)
FORWARDED = (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM, signal.SIGINT)
SIGNAL_FILE = "TESSERAE_SIGNAL_FILE"  # the batch shell's record of signals that came before the launcher
REQUEUE_WAIT_ENV, REQUEUE_WAIT_DEFAULT = "TESSERAE_REQUEUE_WAIT", 300.0
_COMMENT = re.compile(r"(?:^|\s)Comment=(\S*)")


def read_assignment(env: Mapping[str, str], scontrol: str = "scontrol", timeout: float = 15.0
                    ) -> tuple[Assignment, bool]:
    """The daemon's assignment and whether the job is packable (its metadata does not say --no-pack)."""
    if env.get("TESSERAE_ASSIGNMENT"):
        a = Assignment.decode(env["TESSERAE_ASSIGNMENT"])
        return a, a.packed or env.get("TESSERAE_PACKABLE") == "1"
    job_id = env.get("SLURM_JOB_ID")
    if not job_id:
        raise InputError("no SLURM_JOB_ID and no TESSERAE_ASSIGNMENT: run inside a tesserae-managed Slurm job")
    out = subprocess.run([scontrol, "show", "job", "-o", job_id], capture_output=True, text=True,
                         timeout=timeout, check=False)
    if out.returncode != 0:
        raise InputError(f"scontrol show job {job_id} failed: {out.stderr.strip()[:200]}")
    found = from_scontrol_oneliner(out.stdout)
    if found is None:
        raise InputError(f"job {job_id} has no tesserae assignment (was it started by the tesserae daemon?)")
    return found, found.packed or _packable(out.stdout)


def stop_record(a: Assignment, env: Mapping[str, str]) -> StopRecord | None:
    """Where this run records an early stop, when the daemon asked for it (``preemption.stop_records_dir``)."""
    directory = a.extra.get(STOPS_KEY)
    restart = env.get("SLURM_RESTART_COUNT", "0") or "0"
    if not directory or not restart.isdigit():
        return None
    return StopRecord(directory, a.job_id, int(restart))


def _packable(oneliner: str) -> bool:
    from ..model.meta import JobMeta
    m = _COMMENT.search(oneliner)
    try:
        meta = JobMeta.decode(m.group(1)) if m else None
    except InputError:
        return False
    return meta is not None and not meta.no_pack and not meta.no_profile


def node_env(a: Assignment, node: str, env: Mapping[str, str]) -> dict[str, str]:
    gpus = a.gpus.get(node)
    if gpus is None:
        raise InputError(f"assignment of job {a.job_id} names nodes {sorted(a.gpus)}, but this is {node!r}")
    out = {
        "CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in gpus),
        "TESSERAE_GPUS": ",".join(str(g) for g in gpus),
        "TESSERAE_ROUND": str(a.round_id),
        "TESSERAE_PARTNER": a.partner,
        "TESSERAE_STRATEGY": a.strategy,
        "TESSERAE_NODES": ",".join(sorted(a.gpus)),
    }
    reports = a.extra.get(REPORTS_KEY)
    if reports:  # online feedback (harness/report.py): where the payload appends its measured steps/s
        out[ENV_FILE] = os.path.join(reports, f"{a.job_id}.jsonl")
        out[ENV_EVERY] = a.extra.get(EVERY_KEY, "60")
    return out


def build_command(payload: Sequence[str], a: Assignment, node: str, env: Mapping[str, str], *,
                  torchrun: bool, megatron: bool, master_port: int | None = None) -> list[str]:
    cmd = list(payload)
    if megatron and a.strategy:
        total = sum(len(v) for v in a.gpus.values())
        cmd += megatron_parallelism(parse_strategy(a.strategy), total).flags()
    if not torchrun:
        return cmd
    nodes = sorted(a.gpus)
    if master_port is None:  # one port per job so packed pairs on one node do not collide
        master_port = 20000 + int(a.job_id) % 20000 if a.job_id.isdigit() else 29500
    return ["torchrun", f"--nnodes={len(nodes)}", f"--node_rank={nodes.index(node)}",
            f"--nproc_per_node={len(a.gpus[node])}", f"--master_addr={env.get('TESSERAE_MASTER_ADDR', nodes[0])}",
            f"--master_port={master_port}", *cmd]


def run(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="tesserae launch", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--torchrun", action="store_true", help="wrap the payload in torchrun (one process per GPU)")
    p.add_argument("--megatron", action="store_true", help="append Megatron-LM TP/PP flags for the strategy")
    p.add_argument("--mps-base", default=None,
                   help="node-local base dir for MPS pipes/logs (default $TESSERAE_MPS_BASE or /tmp/tesserae-mps)")
    p.add_argument("--checkpoint-signal", default="USR1",
                   help="signal the payload checkpoints on; SIGUSR1 from Slurm is translated to it (Megatron's "
                        "--exit-signal-handler listens for TERM)")
    p.add_argument("--requeue-wait", type=float, default=None, metavar="SECONDS",
                   help="after a checkpoint signal, how long to outlive the payload waiting for the daemon's "
                        f"requeue-hold (default ${REQUEUE_WAIT_ENV} or {REQUEUE_WAIT_DEFAULT:g})")
    p.add_argument("payload", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]")
    args = p.parse_args(argv)
    payload = args.payload[1:] if args.payload[:1] == ["--"] else args.payload
    if not payload:
        p.error("missing payload command after --")
    logging.basicConfig(level=logging.INFO, format="tesserae-launch: %(message)s")
    try:
        ckpt = signal.Signals["SIG" + args.checkpoint_signal.upper().removeprefix("SIG")]
        wait_s = float(os.environ.get(REQUEUE_WAIT_ENV, REQUEUE_WAIT_DEFAULT)) if args.requeue_wait is None \
            else args.requeue_wait
    except (KeyError, ValueError) as exc:
        print(f"tesserae launch: error: bad --checkpoint-signal or {REQUEUE_WAIT_ENV}: {exc}", file=sys.stderr)
        return 2
    # From here on a signal is never lost: before the payload exists it is kept, and the signals the
    # batch shell recorded before this process could listen are read back from its file.
    forwarder = _Forwarder({signal.SIGUSR1: ckpt}, ckpt)
    previous = {s: signal.signal(s, forwarder) for s in FORWARDED}
    env = dict(os.environ)
    forwarder.follow(env.get(SIGNAL_FILE, ""))
    early = forwarder.read_recorded()
    try:
        a, packable = read_assignment(env)
        node = env.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
        child_env = {**env, **node_env(a, node, env)}
        cmd = build_command(payload, a, node, child_env, torchrun=args.torchrun, megatron=args.megatron)
    except InputError as exc:
        print(f"tesserae launch: error: {exc}", file=sys.stderr)
        _restore(previous)
        return 2
    mps: MpsSetup | None = None
    if packable:  # a partner may join at any time: be a client of the GPUs' MPS server from the start
        mps = join_mps(a.job_id, a.gpus[node], a.mps_percentage, node, int(env.get("SLURM_LOCALID", "0")),
                       args.mps_base)
        child_env.update(mps.env)
    record = {"job": a.job_id, "round": a.round_id, "node": node, "gpus": list(a.gpus[node]),
              "partner": a.partner, "packable": packable, "signals_before_launcher": early,
              "mps": mps.record if mps is not None else None}
    print("tesserae-launch: record " + json.dumps(record, separators=(",", ":")), file=sys.stderr, flush=True)
    log.info("job %s round %s on %s GPUs %s%s: %s", a.job_id, a.round_id, node, child_env["TESSERAE_GPUS"],
             f" packed with {a.partner}" if a.partner else "", " ".join(cmd))
    try:
        forwarder.read_recorded()
        if forwarder.terminated:  # Slurm is ending the job: do not start what would be killed at once
            log.info("terminated before the payload started")
            return 128 + signal.SIGTERM
        return _run_forwarding(cmd, child_env, forwarder, wait_s, stop_record(a, env))
    finally:
        _restore(previous)
        if mps is not None:
            leave_mps(mps)


class _Forwarder:
    """Signal handler: passes checkpoint/termination signals to the payload's process group,
    translating the checkpoint signal. Signals that arrive before the payload exists are kept (once
    each); the checkpoint signal waits until a payload process catches it."""

    def __init__(self, translate: Mapping[int, int], checkpoint: int) -> None:
        self.translate = dict(translate)
        self.checkpoint = checkpoint  # the payload's checkpoint signal (after translation)
        self.child: subprocess.Popen[bytes] | None = None
        self.pending: list[int] = []  # received before the payload started, in order, no repeats
        self.held: list[int] = []  # checkpoint signals the payload does not catch yet
        self.checkpointing = False  # a checkpoint signal reached the payload: the daemon's requeue-hold follows
        self.terminated = False
        self.file, self.offset = "", 0  # the batch shell's signal record (see follow)

    def __call__(self, signum: int, _frame: object) -> None:
        self._note(signum)
        if self.child is None:
            if signum not in self.pending:
                self.pending.append(signum)
            return
        self._send(signum)

    def _note(self, signum: int) -> None:
        if signum == signal.SIGTERM:
            self.terminated = True

    def follow(self, path: str) -> None:
        """Read signals the batch shell trapped (one name per line, appended) from here on."""
        self.file, self.offset = path, 0

    def read_recorded(self) -> list[str]:
        """Handle the signals the shell recorded since the last read, as if they came to this process."""
        if not self.file:
            return []
        try:
            with open(self.file, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return []
        complete = data[:data.rfind(b"\n") + 1]
        self.offset += len(complete)
        names = []
        for name in complete.decode(errors="replace").split():
            try:
                signum = signal.Signals["SIG" + name.upper().removeprefix("SIG")]
            except KeyError:
                continue
            if signum in FORWARDED:
                names.append(name)
                self(signum, None)
        return names

    def attach(self, child: subprocess.Popen[bytes]) -> None:
        self.child = child
        while self.pending:
            self._send(self.pending.pop(0))

    def _send(self, signum: int) -> None:
        assert self.child is not None
        target = self.translate.get(signum, signum)
        if target == self.checkpoint and not _group_catches(self.child.pid, target):
            if target not in self.held:
                log.info("holding signal %d until the payload listens for it", target)
                self.held.append(target)
            return
        log.info("forwarding signal %d to the payload as %d", signum, target)
        self._kill(target, checkpoint=target == self.checkpoint and signum != signal.SIGTERM)

    def poll(self) -> None:
        """Deliver held checkpoint signals once a payload process catches them."""
        if self.held and self.child is not None and _group_catches(self.child.pid, self.checkpoint):
            self.held.clear()
            log.info("the payload listens now: forwarding signal %d", self.checkpoint)
            self._kill(self.checkpoint, checkpoint=True)

    def _kill(self, target: int, checkpoint: bool) -> None:
        """Signal the payload's group. Only a checkpoint signal the payload got makes the launcher wait
        for the requeue-hold: a payload that ended before it listened has simply ended."""
        assert self.child is not None
        try:
            os.killpg(self.child.pid, target)
        except ProcessLookupError:
            return
        if checkpoint and self.child.poll() is None:
            self.checkpointing = True


def _group_catches(pgid: int, signum: int) -> bool:
    """Whether a process of the payload's process group has a handler for ``signum`` (Linux /proc).
    Where /proc cannot tell, assume it does (the signal is sent as before)."""
    bit = 1 << (signum - 1)
    proc = Path("/proc")
    if not (proc / str(pgid) / "status").exists():
        return True
    for st in proc.glob("[0-9]*/stat"):
        try:
            fields = st.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid:  # fields after the name: state, ppid, pgrp, ...
                continue
            for line in (st.parent / "status").read_text().splitlines():
                if line.startswith("SigCgt:") and int(line.split()[1], 16) & bit:
                    return True
        except (OSError, IndexError, ValueError):
            continue
    return False


def _restore(previous: Mapping[signal.Signals, Callable[[int, FrameType | None], Any] | int | None]) -> None:
    for s, h in previous.items():
        signal.signal(s, h)


def _run_forwarding(cmd: Sequence[str], env: Mapping[str, str], forwarder: _Forwarder, requeue_wait: float,
                    record: StopRecord | None = None) -> int:
    """Run the payload in its own process group with the checkpoint signal ignored until it installs
    a handler, pass signals on, and after a checkpoint signal outlive it until the requeue-hold, which
    ``record`` (when the daemon asked for one) tells the daemon it may send now."""
    ckpt = forwarder.checkpoint
    child = subprocess.Popen(list(cmd), env=dict(env), start_new_session=True,
                             preexec_fn=lambda: signal.signal(ckpt, signal.SIG_IGN))
    forwarder.attach(child)
    while True:
        try:
            rc = child.wait(timeout=0.05)
            break
        except subprocess.TimeoutExpired:
            forwarder.read_recorded()
            forwarder.poll()
    if not forwarder.checkpointing or forwarder.terminated:
        return rc
    log.info("payload exited with %d after the checkpoint signal; waiting up to %gs for the requeue-hold", rc,
             requeue_wait)
    # Recorded only when this process will wait: a record of a job about to end could make the
    # daemon requeue a job that has finished.
    recorded = record is not None and requeue_wait > 0 and record.write(rc)
    try:
        deadline = time.monotonic() + requeue_wait
        while time.monotonic() < deadline and not forwarder.terminated:
            time.sleep(0.05)
            forwarder.read_recorded()
        if not forwarder.terminated:
            log.info("no requeue-hold within %gs: the job ends with the payload's exit code %d", requeue_wait, rc)
    finally:
        if recorded and record is not None:
            record.remove()
    return rc
