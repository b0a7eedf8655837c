"""A generated Slurm for rounds at a size this machine cannot run: Slurm 22.05's client output (``squeue
--json``, ``sinfo --json``, the poll's and a stop's text) printed from an in-memory cluster, and its changing commands
(``scontrol update/release/uhold/hold/requeuehold``, ``scancel``) applied to that cluster, counted and not
executed.

It stands in for ``SlurmRunner`` under the real ``SlurmCliBackend``, so the daemon's own work is all
real: argv building, JSON parsing, the round, the database. Only the controller is missing; what it
would do is kept to what the daemon reads back: a released job pinned to nodes starts there at once (its
jobs hold no GPU GRES: the daemon arbitrates GPUs, tsbatch/gpus.py), a requeue-hold makes a running job
held and pending, a signal changes nothing (the payload's checkpoint is the grace's business). The JSON
carries every field the release prints (taken from a job and a node Slurm 22.05.8 printed), so its size,
and so parsing it, is real.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..slurm import SlurmCommandError
from ..slurm.parse import parse_nodelist

RELEASE = (22, 5, 8)
META = {"plugin": {"type": "openapi/v0.0.38", "name": "Slurm OpenAPI v0.0.38"},
        "Slurm": {"version": {"major": RELEASE[0], "micro": RELEASE[2], "minor": RELEASE[1]},
                  "release": ".".join(map(str, (RELEASE[0], f"{RELEASE[1]:02d}", RELEASE[2])))}}
# The fields of a 22.05.8 job the daemon does not read, as that release printed them (tests/slurm/fixtures)
JOB_REST: dict[str, object] = {
    "accrue_time": 0, "array_job_id": 0, "array_task_id": None, "array_max_tasks": 0, "array_task_string": "",
    "association_id": 0, "batch_features": "", "batch_flag": True, "flags": [], "burst_buffer": "",
    "burst_buffer_state": "", "cluster": "perlmutter", "cluster_features": "", "command": "/home/u/train.sbatch",
    "container": "", "contiguous": False, "core_spec": None, "thread_spec": None, "cores_per_socket": None,
    "billable_tres": 1.0, "cpus_per_task": None, "cpu_frequency_minimum": None, "cpu_frequency_maximum": None,
    "cpu_frequency_governor": None, "cpus_per_tres": "", "deadline": 0, "delay_boot": 0, "dependency": "",
    "derived_exit_code": 0, "excluded_nodes": "", "features": "", "federation_origin": "",
    "federation_siblings_active": "", "federation_siblings_viable": "", "group_id": 1000, "group_name": "users",
    "last_sched_evaluation": 0, "licenses": "", "max_cpus": 0, "max_nodes": 0, "mcs_label": "",
    "memory_per_tres": "", "tasks_per_core": None, "tasks_per_node": 0, "tasks_per_socket": None,
    "tasks_per_board": 0, "cpus": 1, "node_count": 1, "tasks": 1, "het_job_id": 0, "het_job_id_set": "",
    "het_job_offset": 0, "prefer": "", "memory_per_node": None, "memory_per_cpu": None,
    "minimum_cpus_per_node": 1, "minimum_tmp_disk_per_node": 0, "preempt_time": 0, "pre_sus_time": 0,
    "profile": None, "qos": "normal", "reboot": False, "resize_time": 0, "resv_name": "", "shared": None,
    "show_flags": ["SHOW_ALL", "SHOW_DETAIL", "SHOW_LOCAL"], "sockets_per_board": 0, "sockets_per_node": None,
    "standard_error": "", "standard_input": "/dev/null", "standard_output": "/home/u/slurm-%j.out",
    "suspend_time": 0, "system_comment": "", "time_limit": None, "time_minimum": 0, "threads_per_core": None,
    "tres_bind": "", "tres_freq": "", "tres_per_job": "", "tres_per_socket": "", "tres_per_task": "",
    "tres_req_str": "cpu=1,mem=16000M,node=1,billing=1", "tres_alloc_str": "", "user_id": 1000, "wckey": "",
    "current_working_directory": "/home/u",
}
NODE_REST: dict[str, object] = {
    "architecture": "x86_64", "burstbuffer_network_address": "", "boards": 1, "boot_time": 0, "comment": "",
    "cores": 1, "cpu_binding": 0, "cpu_load": 0, "extra": "", "free_memory": 200000, "last_busy": 0,
    "features": "", "active_features": "", "gres_drained": "N/A", "mcs_label": "",
    "next_state_after_reboot": "invalid", "address": "", "hostname": "", "next_state_after_reboot_flags": [],
    "operating_system": "Linux", "owner": None, "port": 6818, "real_memory": 256000, "reason_changed_at": 0,
    "reason_set_by_user": None, "slurmd_start_time": 0, "sockets": 64, "threads": 1, "temporary_disk": 0,
    "weight": 1, "tres": "cpu=64,mem=256000M,billing=64", "slurmd_version": "22.05.8", "alloc_memory": 0,
    "idle_cpus": 64, "tres_used": "", "tres_weighted": 0.0,
}
CPUS = 64  # per node, as a Perlmutter GPU node
WRITES = {"update", "release", "uhold", "hold", "requeuehold", "scancel"}


@dataclass
class GenJob:
    job_id: int
    user: str
    comment: str  # tsbatch's tag and metadata
    gpus: int  # in all; a job of more than a node's GPUs takes whole nodes
    submit_time: int
    state: str = "PENDING"
    reason: str = "JobHeldUser"
    priority: int = 0
    required: tuple[str, ...] = ()
    admin_comment: str = ""
    nodes: tuple[str, ...] = ()
    start_time: int = 0
    end_time: int = 0
    restarts: int = 0


@dataclass
class GeneratedSlurm:
    """The cluster (``nodes`` named node0001.. with ``gpus_per_node`` each) and its jobs; ``run`` answers
    an argv as the 22.05 clients would. ``calls`` counts every command by verb; ``busy_s`` and ``busy_cpu_s``
    are the wall and CPU time spent printing and applying (Slurm's time, not the daemon's)."""

    nodes: int
    gpus_per_node: int = 4
    partition: str = "tesserae"
    now: int = 1_800_000_000
    jobs: dict[int, GenJob] = field(default_factory=dict)
    calls: Counter[str] = field(default_factory=Counter)
    busy_s: float = 0.0
    busy_cpu_s: float = 0.0
    _busy: Counter[str] = field(default_factory=Counter)  # node -> running jobs (one CPU each)
    _json: dict[int, str] = field(default_factory=dict)  # job id -> its printed JSON while it is unchanged

    def node_name(self, i: int) -> str:
        return f"node{i + 1:04d}"

    # ---- what the world does to Slurm -------------------------------------------------------------
    def submit(self, job: GenJob) -> None:
        self.jobs[job.job_id] = job
        self._json.pop(job.job_id, None)

    def finish(self, job_id: int, state: str = "COMPLETED") -> None:
        """The job's payload ended: its GPUs are free."""
        j = self.jobs[job_id]
        self._free_cpus(j)
        j.state, j.reason, j.end_time = state, "None", self.now
        self._json.pop(job_id, None)

    def forget_finished(self, before: int) -> None:
        """Slurm drops ended jobs from its listing after MinJobAge: here those that ended before ``before``."""
        for jid in [j.job_id for j in self.jobs.values()
                    if j.state in ("COMPLETED", "FAILED", "CANCELLED") and j.end_time < before]:
            del self.jobs[jid]
            self._json.pop(jid, None)

    # ---- the runner ---------------------------------------------------------------------------------
    def run(self, argv: Sequence[str], *, input_text: str | None = None, env: Mapping[str, str] | None = None,
            timeout_s: float | None = None, retries: int | None = None) -> str:
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            return self._run([str(a) for a in argv])
        finally:
            self.busy_s += time.perf_counter() - t0
            self.busy_cpu_s += time.process_time() - c0

    def _run(self, argv: list[str]) -> str:
        cmd, rest = argv[0], argv[1:]
        if cmd == "sinfo" and rest == ["--version"]:
            self.calls["sinfo --version"] += 1
            return f"slurm {META['Slurm']['release']}\n"  # type: ignore[index]
        if cmd == "sinfo" and rest == ["--json"]:
            self.calls["sinfo --json"] += 1
            return self._sinfo()
        if cmd == "squeue" and "--json" in rest:
            self.calls["squeue --json"] += 1
            return self._squeue()
        jobs_arg = next((a for a in rest if a.startswith("--jobs=")), None)
        if cmd == "squeue" and jobs_arg is not None:
            self.calls["squeue --jobs"] += 1
            return self._squeue_brief(_ids(jobs_arg.removeprefix("--jobs=")))
        if cmd == "squeue" and "-p" in rest:
            self.calls["squeue poll"] += 1
            return "".join(f"{j.job_id} {_compact(j.state)}\n" for j in self.jobs.values()
                           if j.state in ("PENDING", "RUNNING"))
        if cmd == "scancel":
            self.calls["scancel"] += 1
            ids = [int(a) for a in rest if not a.startswith("-")]
            if not any(a.startswith("--signal") for a in rest):
                for jid in ids:
                    if self._job(jid).state in ("PENDING", "RUNNING"):
                        self.finish(jid, "CANCELLED")
                return ""
            # a signal: scancel skips (and names) each job that has ended or that Slurm no longer knows
            gone = [jid for jid in ids if jid not in self.jobs or self.jobs[jid].state not in ("PENDING", "RUNNING")]
            if gone:
                stderr = "".join(f"scancel: error: Kill job error on job id {jid}: Invalid job id specified\n"
                                 for jid in gone)
                raise SlurmCommandError(f"scancel: {stderr.strip()}", returncode=1, stderr=stderr)
            return ""
        if cmd == "scontrol" and rest and rest[0] in WRITES:
            self.calls[f"scontrol {rest[0]}"] += 1
            return self._scontrol(rest[0], rest[1:])
        raise SlurmCommandError(f"generated Slurm cannot answer {' '.join(argv)}", returncode=1, stderr="")

    def _job(self, job_id: int) -> GenJob:
        if job_id not in self.jobs:
            raise SlurmCommandError(f"Invalid job id specified: {job_id}", returncode=1,
                                    stderr="slurm_update error: Invalid job id specified")
        return self.jobs[job_id]

    def _scontrol(self, verb: str, args: list[str]) -> str:
        if verb == "update":
            fields = dict(a.split("=", 1) for a in args)
            j = self._job(int(fields.pop("JobId")))
            if "NodeList" in fields:
                j.required = tuple(parse_nodelist(fields["NodeList"]))
            if "AdminComment" in fields:
                j.admin_comment = fields["AdminComment"]
            if "Comment" in fields:
                j.comment = fields["Comment"]
            self._json.pop(j.job_id, None)
            return ""
        if verb == "requeuehold":
            unknown = [jid for jid in _ids(args[-1]) if jid not in self.jobs]
            for jid in _ids(args[-1]):
                held = self.jobs.get(jid)
                if held is not None and held.state == "RUNNING":  # Incomplete: an ended job stays ended
                    self._free_cpus(held)
                    held.state, held.reason, held.priority, held.nodes = "PENDING", "JobHeldUser", 0, ()
                    held.restarts += 1
                    self._json.pop(jid, None)
            if unknown:  # scontrol tries every job of the list, then reports the ones it could not
                self._job(unknown[0])
            return ""
        for jid in _ids(args[-1]):
            j = self._job(jid)
            if verb == "release":
                j.priority, j.reason = 1, "None"
                self._try_start(j)
            elif j.state == "PENDING":
                j.priority, j.reason = 0, "JobHeldUser" if verb == "uhold" else "JobHeldAdmin"
            self._json.pop(jid, None)
        return ""

    def _try_start(self, j: GenJob) -> None:
        """What slurmctld's scheduler does right after a release: start a job pinned to nodes (CPUs permitting)."""
        if j.state != "PENDING" or not j.required or any(self._busy[n] >= CPUS for n in j.required):
            return
        self._busy.update(j.required)
        j.state, j.reason, j.nodes, j.start_time = "RUNNING", "None", j.required, self.now

    def _free_cpus(self, j: GenJob) -> None:
        if j.state == "RUNNING":
            self._busy.subtract(j.nodes)

    # ---- printing ------------------------------------------------------------------------------------
    def _squeue(self) -> str:
        parts = []
        for jid, j in self.jobs.items():
            text = self._json.get(jid)
            if text is None:
                text = self._json[jid] = json.dumps(self._job_json(j))
            parts.append(text)
        return '{"meta": ' + json.dumps(META) + ', "errors": [], "jobs": [' + ", ".join(parts) + "]}"

    def _squeue_brief(self, ids: list[int]) -> str:
        """``commands.squeue_brief``'s text, 22.05's way (the exit code a raw wait status)."""
        def t(v: int) -> str:
            return str(v) if v else "N/A"
        return "".join(f"{j.job_id}|{j.state}|{j.user}|{j.restarts}|{t(j.start_time)}|{t(j.end_time)}|0|"
                       f"{','.join(j.nodes)}|\n" for jid in ids if (j := self.jobs.get(jid)) is not None)

    def _job_json(self, j: GenJob) -> dict[str, object]:
        return {**JOB_REST, "job_id": j.job_id, "job_state": j.state, "name": f"train-{j.job_id}",
                "user_name": j.user, "partition": self.partition, "nodes": ",".join(j.nodes),
                "gres_detail": [],
                "comment": j.comment, "admin_comment": j.admin_comment, "restart_cnt": j.restarts,
                "priority": j.priority, "submit_time": j.submit_time, "start_time": j.start_time,
                "end_time": j.end_time, "tres_per_node": "",
                "required_nodes": ",".join(j.required), "batch_host": j.nodes[0] if j.nodes else "",
                "requeue": True, "exit_code": 0, "state_reason": j.reason, "state_description": "",
                "account": "ml", "nice": None, "eligible_time": j.submit_time,
                "node_count": max(1, j.gpus // self.gpus_per_node)}

    def _sinfo(self) -> str:
        nodes = []
        for i in range(self.nodes):
            name = self.node_name(i)
            busy = self._busy[name]
            state = "idle" if not busy else "allocated" if busy >= CPUS else "mixed"
            nodes.append({**NODE_REST, "name": name, "hostname": name, "state": state, "state_flags": [],
                          "partitions": [self.partition], "cpus": CPUS, "alloc_cpus": busy,
                          "gres": f"gpu:{self.gpus_per_node}", "gres_used": "gpu:0(IDX:N/A)", "reason": ""})
        return json.dumps({"meta": META, "errors": [], "nodes": nodes})


def _ids(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def _compact(state: str) -> str:
    return {"PENDING": "PD", "RUNNING": "R"}.get(state, "CD")
