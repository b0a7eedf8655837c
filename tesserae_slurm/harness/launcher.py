"""`tesserae launch -- CMD ...`: the job-side half of a placement.

Runs inside the batch script: reads the daemon's assignment, pins CUDA_VISIBLE_DEVICES to the chosen
GPU indices (Slurm's own choice is overridden on purpose: the daemon is the GPU arbiter), starts MPS
for packed jobs, adds torchrun / Megatron arguments, tells the payload where to report its throughput
(``harness/report.py``), and forwards the checkpoint signal to the payload.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence

from ..model import InputError
from .assignment import EVERY_KEY, REPORTS_KEY, Assignment, from_scontrol_oneliner
from .megatron import parse_strategy
from .mps import start_mps, stop_mps
from .report import ENV_EVERY, ENV_FILE

log = logging.getLogger(__name__)
FORWARDED = (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM, signal.SIGINT)


def read_assignment(env: Mapping[str, str], scontrol: str = "scontrol", timeout: float = 15.0) -> Assignment:
    if env.get("TESSERAE_ASSIGNMENT"):
        return Assignment.decode(env["TESSERAE_ASSIGNMENT"])
    job_id = env.get("SLURM_JOB_ID")
    if not job_id:
        raise InputError("no SLURM_JOB_ID and no TESSERAE_ASSIGNMENT: run inside a tesserae-managed Slurm job")
    out = subprocess.run([scontrol, "show", "job", "-o", job_id], capture_output=True, text=True,
                         timeout=timeout, check=False)
    if out.returncode != 0:
        raise InputError(f"scontrol show job {job_id} failed: {out.stderr.strip()[:200]}")
    a = from_scontrol_oneliner(out.stdout)
    if a is None:
        raise InputError(f"job {job_id} has no tesserae assignment (was it started by the tesserae daemon?)")
    return a


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
        cmd += parse_strategy(a.strategy, total).flags()
    if not torchrun:
        return cmd
    nodes = sorted(a.gpus)
    if master_port is None:  # one port per job so packed pairs on one node do not collide
        master_port = 20000 + int(a.job_id) % 20000 if a.job_id.isdigit() else 29500
    return ["torchrun", f"--nnodes={len(nodes)}", f"--node_rank={nodes.index(node)}",
            f"--nproc_per_node={len(a.gpus[node])}", f"--master_addr={env.get('TESSERAE_MASTER_ADDR', nodes[0])}",
            f"--master_port={master_port}", *cmd]


def run(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="tesserae launch", description=__doc__)
    p.add_argument("--torchrun", action="store_true", help="wrap the payload in torchrun (one process per GPU)")
    p.add_argument("--megatron", action="store_true", help="append Megatron-LM TP/PP flags for the strategy")
    p.add_argument("--mps-base", default=None, help="node-local base dir for MPS pipes/logs (default $TMPDIR or /tmp)")
    p.add_argument("--checkpoint-signal", default="USR1",
                   help="signal the payload checkpoints on; SIGUSR1 from Slurm is translated to it (Megatron's "
                        "--exit-signal-handler listens for TERM)")
    p.add_argument("payload", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]")
    args = p.parse_args(argv)
    payload = args.payload[1:] if args.payload[:1] == ["--"] else args.payload
    if not payload:
        p.error("missing payload command after --")
    logging.basicConfig(level=logging.INFO, format="tesserae-launch: %(message)s")
    try:
        ckpt = signal.Signals["SIG" + args.checkpoint_signal.upper().removeprefix("SIG")]
    except KeyError:
        print(f"tesserae launch: error: unknown signal {args.checkpoint_signal!r}", file=sys.stderr)
        return 2
    # From here on a checkpoint signal is never lost: before the payload exists it is kept and
    # passed on as soon as the payload starts (a job preempted while starting must not just die).
    forwarder = _Forwarder({signal.SIGUSR1: ckpt})
    previous = {s: signal.signal(s, forwarder) for s in FORWARDED}
    env = dict(os.environ)
    try:
        a = read_assignment(env)
        node = env.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
        child_env = {**env, **node_env(a, node, env)}
        cmd = build_command(payload, a, node, child_env, torchrun=args.torchrun, megatron=args.megatron)
    except InputError as exc:
        print(f"tesserae launch: error: {exc}", file=sys.stderr)
        _restore(previous)
        return 2
    mps = start_mps(a.job_id, a.mps_percentage, int(env.get("SLURM_LOCALID", "0")), args.mps_base) \
        if a.packed else None
    if mps is not None:
        child_env.update(mps.env)
    log.info("job %s round %s on %s GPUs %s%s: %s", a.job_id, a.round_id, node, child_env["CUDA_VISIBLE_DEVICES"],
             f" packed with {a.partner}" if a.partner else "", " ".join(cmd))
    try:
        return _run_forwarding(cmd, child_env, forwarder)
    finally:
        _restore(previous)
        if mps is not None:
            stop_mps(mps)


class _Forwarder:
    """Signal handler: passes checkpoint/termination signals to the payload's process group,
    translating the checkpoint signal; signals that arrive before the payload exists are kept."""

    def __init__(self, translate: Mapping[int, int]) -> None:
        self.translate = dict(translate)
        self.child: subprocess.Popen[bytes] | None = None
        self.pending: list[int] = []

    def __call__(self, signum: int, _frame: object) -> None:
        if self.child is None:
            self.pending.append(signum)
            return
        self._send(signum)

    def attach(self, child: subprocess.Popen[bytes]) -> None:
        self.child = child
        while self.pending:
            self._send(self.pending.pop(0))

    def _send(self, signum: int) -> None:
        assert self.child is not None
        target = self.translate.get(signum, signum)
        log.info("forwarding signal %d to the payload as %d", signum, target)
        try:
            os.killpg(self.child.pid, target)
        except ProcessLookupError:
            pass


def _restore(previous: Mapping[int, object]) -> None:
    for s, h in previous.items():
        signal.signal(s, h)  # type: ignore[arg-type]


def _run_forwarding(cmd: Sequence[str], env: Mapping[str, str], forwarder: _Forwarder) -> int:
    """Run the payload in its own process group and pass checkpoint/termination signals on to it."""
    child = subprocess.Popen(list(cmd), env=dict(env), start_new_session=True)
    forwarder.attach(child)
    while True:
        try:
            return child.wait()
        except InterruptedError:
            continue
