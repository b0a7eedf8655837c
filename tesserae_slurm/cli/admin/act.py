"""`tesserae hold|release|requeue|cancel|unpin JOB`, `tesserae pin|keep-off JOB NODELIST` and
`tesserae drain|resume NODE`: operators' actions.

They leave a request for the daemon (daemon/operators/admin.py), which records who and when and acts at its next
round; the command says so. Non-operators are refused here in one line (and again by the daemon, which
trusts the request file's owner, not this process).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ...model import InputError

if TYPE_CHECKING:
    from ...site.config import SiteConfig

HELP = {  # as in cli/main.py's COMMANDS (the listing shows those without importing this module)
    "hold": "operator: keep a managed job from being placed until released",
    "release": "operator: let a held job be scheduled again",
    "requeue": "operator: checkpoint-signal and requeue a running managed job",
    "cancel": "operator: cancel a managed job",
    "pin": "operator: place a managed job only on these nodes (Slurm hostlist)",
    "keep-off": "operator: never place a managed job on these nodes (Slurm hostlist)",
    "unpin": "operator: lift a job's pin or keep-off",
    "drain": "operator: stop placing jobs on a node, move its jobs off (the daemon only)",
    "resume": "operator: place jobs on a drained node again",
}
DESCRIPTION = {
    "hold": "Keep a managed job from being placed (a running one is stopped like a preemption) until "
            "`tesserae release`.",
    "release": "Let a held job be scheduled again.",
    "requeue": "Checkpoint-signal and requeue a running managed job; the policy places it again.",
    "cancel": "Cancel a managed job (scancel).",
    "pin": "Place a managed job only on these nodes, consolidated within them (it waits while they cannot hold "
           "it; a running job elsewhere is moved). Replaces an earlier pin or keep-off.",
    "keep-off": "Never place a managed job on these nodes (a running job there is moved). Replaces an earlier "
                "pin or keep-off.",
    "unpin": "Lift a job's pin or keep-off.",
    "drain": "Stop placing jobs on a node and move its jobs off. The daemon only: Slurm's node state is untouched.",
    "resume": "Place jobs on a drained node again.",
}
EFFECT = {
    "hold": "job {t} will be held", "release": "job {t} will be released", "requeue": "job {t} will be requeued",
    "cancel": "job {t} will be cancelled", "pin": "job {t} will be pinned to {n}",
    "keep-off": "job {t} will be kept off {n}", "unpin": "job {t} will be unpinned",
    "drain": "node {t} will be drained for tesserae",
    "resume": "node {t} will be resumed for tesserae",
}


def add_parser(sub: argparse._SubParsersAction) -> None:
    for command, text in HELP.items():
        p = sub.add_parser(command, help=text, description=DESCRIPTION[command] + " Takes effect at the daemon's "
                           "next round; recorded with who and when (`tesserae explain JOB`).")
        p.add_argument("target", metavar="NODE" if command in ("drain", "resume") else "JOB")
        if command in ("pin", "keep-off"):
            p.add_argument("nodes", metavar="NODELIST", help="Slurm hostlist, e.g. node[1-3],gpu7")
        p.add_argument("--config", default=None, help="daemon config (default $TESSERAE_CONFIG, else "
                                                      "/etc/tesserae/tesserae.yaml)")
        p.set_defaults(func=run, admin_command=command)


def run(args: argparse.Namespace) -> int:
    import os

    from ...daemon.operators import admin
    from ...site.load import resolve_config

    command, target, nodes = args.admin_command, str(args.target), str(getattr(args, "nodes", "") or "")
    admin.check_target(command, target, nodes)
    cfg = resolve_config(args.config, check_policy=False)[0]
    uid = os.geteuid()
    try:
        daemon_uid = os.stat(admin.requests_dir(cfg)).st_uid
    except OSError:
        daemon_uid = None
    if not admin.is_operator(uid, cfg, daemon_uid if daemon_uid is not None else -1):
        raise InputError(f"{admin.user_name(uid)} is not a tesserae operator (root, the daemon's user, or "
                         "admin.operators in the config)")
    if command in admin.JOB_COMMANDS:
        _check_job(cfg, target)
    admin.submit(cfg, command, target, nodes=nodes)
    print(f"{EFFECT[command].format(t=target, n=nodes)} at the daemon's next round (within "
          f"{cfg.scheduler.round_seconds:g} s); recorded as {admin.user_name(uid)}")
    return 0


def _check_job(cfg: SiteConfig, job: str) -> None:
    """A job the daemon manages and that has not ended (when the database is readable here)."""
    from ...daemon.state.store import TERMINAL_STATES, Store

    try:
        store = Store.open(cfg.state.database, read_only=True)
    except (InputError, OSError):
        return  # not readable by this operator: the daemon checks again
    try:
        row = store.job(job)
    finally:
        store.close()
    if row is None:
        raise InputError(f"job {job} is not managed by tesserae (not in its database)")
    if row.state in TERMINAL_STATES:
        raise InputError(f"job {job} has ended ({row.state})")
