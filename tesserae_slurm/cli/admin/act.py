"""`tesserae hold|release|requeue|cancel|unpin JOB`, `tesserae pin|keep-off JOB NODELIST` and
`tesserae drain|resume NODE`: operators' actions.

They leave a request for the daemon (daemon/operators/admin.py), which records who and when and acts at its next
round; the command says so. Non-operators are refused here in one line (and again by the daemon, which
trusts the request file's owner, not this process).
"""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ...model import InputError

if TYPE_CHECKING:
    from ...site.config import SiteConfig
    from .common import ApiClient

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
    seen = _Seen(args, cfg)
    problem = admin.misfit(command, target, nodes, seen.job_state(target) if command in admin.JOB_COMMANDS else "",
                           seen.in_force(), seen.nodes() if command not in admin.JOB_COMMANDS
                           or command in admin.RULE_COMMANDS else None, cfg.slurm.partition)
    if problem:
        raise InputError(problem)
    admin.submit(cfg, command, target, nodes=nodes)
    print(f"{EFFECT[command].format(t=target, n=nodes)} at the daemon's next round ({seen.promise()}); "
          f"recorded as {admin.user_name(uid)}")
    return 0


class _Seen:
    """What the checks of a request read: the daemon's records (the database, or its API for an operator
    who cannot read it) and Slurm's partition (its nodes; the jobs the daemon has not looked at yet)."""

    def __init__(self, args: argparse.Namespace, cfg: SiteConfig) -> None:
        from .common import open_source

        self.cfg = cfg
        self.source = open_source(argparse.Namespace(db=None, config=args.config, api=None))

    def _api(self) -> ApiClient | None:
        from .common import ApiClient

        return self.source if isinstance(self.source, ApiClient) else None

    def job_state(self, job: str) -> str | None:
        from ...daemon.operators import admin
        from ...daemon.operators.readers import FIRST_LOOK, FirstLook, first_look_rows

        api = self._api()
        if api is not None:  # the API lists the jobs the daemon has not looked at too
            found = api.get("/api/jobs", jobs=job, all="1")["jobs"]
            if not found:
                return None
            return admin.FIRST_LOOK_STATE if str(found[0].get("reason", "")).startswith(FIRST_LOOK) \
                else str(found[0]["state"])
        row = self.source.job(job)  # type: ignore[union-attr]
        if row is not None:
            return str(row.state)
        listed = first_look_rows(FirstLook(self.cfg).jobs(), set())
        return admin.FIRST_LOOK_STATE if any(r.job_id == job for r in listed) else None

    def in_force(self) -> dict[str, list[dict[str, Any]]]:
        from ...daemon.operators.readers import in_force

        api = self._api()
        return api.get("/api/actions") if api is not None else in_force(self.source)  # type: ignore[arg-type]

    def nodes(self) -> set[str]:
        """The partition's nodes as Slurm lists them; where Slurm cannot be asked, as the daemon's newest
        decided round saw them (drained and down ones included)."""
        from ...site.connect import backend_from_config
        from ...slurm import SlurmError

        try:
            return {n.name for n in backend_from_config(self.cfg).list_nodes(self.cfg.slurm.partition)}
        except SlurmError as exc:
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        api = self._api()
        if api is not None:
            seen = {n["name"] for n in api.get("/api/cluster")["nodes"]}
        else:
            from ...daemon.operators.api import cluster

            seen = {n["name"] for n in cluster(self.source)["nodes"]}  # type: ignore[arg-type]
        if not seen:
            raise InputError(f"cannot check the node against partition {self.cfg.slurm.partition}: Slurm not "
                             f"reachable ({why}) and the daemon has not decided a round yet")
        return seen

    def promise(self) -> str:
        """How soon the next round takes the request in: from the recent rounds' starts, else the config."""
        from ...daemon.operators.readers import round_cadence

        api = self._api()
        if api is not None:
            starts = [datetime.fromisoformat(r["started_at"]).timestamp()
                      for r in api.get("/api/rounds", n="8")["rounds"] if r.get("kind", "round") == "round"]
        else:
            starts = [r.started_at for r in self.source.rounds(limit=8) if r.kind == "round"]  # type: ignore[union-attr]
        cadence = round_cadence(starts)
        if cadence is None:
            return f"within about {self.cfg.scheduler.round_seconds:g} s, the configured round length"
        lo, hi = cadence
        return f"within about {hi:.0f} s: rounds began every {lo:.0f}-{hi:.0f} s lately"
