"""Pure text of the dev cluster's slurm.conf, gres.conf and cgroup.conf, and where files live.

Everything sits under one root directory so several dev clusters can share a host: a private
munge socket and key, per-node spool/pid/log files (`%n`), and ports chosen by the caller.
The settings are the ones seen working on Debian 12 / Slurm 22.05 without systemd
(see docs/devcluster.md); fake GPUs are character devices aliasing /dev/null.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

# AF_UNIX socket paths are limited to 108 bytes including the terminating NUL.
MAX_SOCKET_PATH = 107


@dataclass(frozen=True)
class DevClusterLayout:
    """File locations under the cluster's root directory."""

    root: Path

    @property
    def slurm_conf(self) -> Path:
        return self.root / "etc" / "slurm.conf"

    @property
    def gres_conf(self) -> Path:
        return self.root / "etc" / "gres.conf"

    @property
    def cgroup_conf(self) -> Path:
        return self.root / "etc" / "cgroup.conf"

    @property
    def job_submit_lua(self) -> Path:
        """slurmctld looks for job_submit.lua next to slurm.conf."""
        return self.root / "etc" / "job_submit.lua"

    @property
    def state_file(self) -> Path:
        return self.root / "devcluster-state.json"

    @property
    def munge_dir(self) -> Path:
        return self.root / "munge"

    @property
    def munge_key(self) -> Path:
        return self.munge_dir / "munge.key"

    @property
    def munge_socket(self) -> Path:
        return self.munge_dir / "munge.sock"

    @property
    def log_dir(self) -> Path:
        return self.root / "log"

    @property
    def run_dir(self) -> Path:
        return self.root / "run"

    @property
    def state_save_dir(self) -> Path:
        return self.root / "state"

    @property
    def spool_dir(self) -> Path:
        return self.root / "spool"

    @property
    def fakegpu_dir(self) -> Path:
        return self.root / "fakegpu"

    @property
    def slurmctld_log(self) -> Path:
        return self.log_dir / "slurmctld.log"

    def slurmd_log(self, node: str) -> Path:
        return self.log_dir / f"slurmd-{node}.log"

    @property
    def munged_log(self) -> Path:
        return self.log_dir / "munged.log"

    def fake_gpu(self, index: int) -> Path:
        return self.fakegpu_dir / f"nvidia{index}"

    def directories(self) -> tuple[Path, ...]:
        return (
            self.root / "etc",
            self.munge_dir,
            self.log_dir,
            self.run_dir,
            self.state_save_dir,
            self.spool_dir,
            self.fakegpu_dir,
        )


@dataclass(frozen=True)
class DevClusterSpec:
    """What to generate: node count, GPUs, partition name, host and ports."""

    nodes: int = 4
    gpus_per_node: int = 4
    shards_per_gpu: int = 2
    partition: str = "tesserae"
    cpus_per_node: int = 16
    memory_mb: int = 16000
    cluster_name: str = "tesserae-dev"
    controller_host: str = "localhost"
    ctld_port: int = 6817
    slurmd_ports: tuple[int, ...] = ()
    job_submit: bool = True  # JobSubmitPlugins=lua with tesserae's job_submit.lua, as a site would run it
    # A second partition over the same nodes that the daemon does not manage (plain Slurm: its own
    # priority and backfill); `tesserae devcluster compare` runs its baseline there. None: no such partition.
    plain_partition: str | None = None
    # Slurm's backfill interval (bf_interval, default 30 s); None keeps Slurm's default.
    bf_interval_s: int | None = None

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ValueError(f"nodes must be >= 1, got {self.nodes}")
        if self.gpus_per_node < 1:
            raise ValueError(f"gpus_per_node must be >= 1, got {self.gpus_per_node}")
        if self.shards_per_gpu < 0:
            raise ValueError(f"shards_per_gpu must be >= 0, got {self.shards_per_gpu}")
        if self.slurmd_ports and len(self.slurmd_ports) != self.nodes:
            raise ValueError(f"need {self.nodes} slurmd ports, got {len(self.slurmd_ports)}")
        for name in (self.partition, self.plain_partition):
            if name is not None and not name.replace("_", "").replace("-", "").isalnum():
                raise ValueError(f"partition name {name!r} must be alphanumeric")
        if self.plain_partition == self.partition:
            raise ValueError(f"the plain partition must differ from the managed one ({self.partition!r})")
        if self.bf_interval_s is not None and self.bf_interval_s < 1:
            raise ValueError(f"bf_interval_s must be >= 1, got {self.bf_interval_s}")

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(f"node{i}" for i in range(1, self.nodes + 1))

    @property
    def node_range(self) -> str:
        return "node1" if self.nodes == 1 else f"node[1-{self.nodes}]"

    @property
    def gres(self) -> str:
        gres = f"gpu:{self.gpus_per_node}"
        if self.shards_per_gpu:
            gres += f",shard:{self.gpus_per_node * self.shards_per_gpu}"
        return gres


def render_slurm_conf(spec: DevClusterSpec, layout: DevClusterLayout) -> str:
    ports = spec.slurmd_ports or tuple(17001 + i for i in range(spec.nodes))
    gres_types = "gpu,shard" if spec.shards_per_gpu else "gpu"
    lines = [
        "# Generated by tesserae devcluster; regenerated by every `up`.",
        f"ClusterName={spec.cluster_name}",
        f"SlurmctldHost={spec.controller_host}(127.0.0.1)",
        f"SlurmctldPort={spec.ctld_port}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={layout.munge_socket}",
        f"StateSaveLocation={layout.state_save_dir}",
        f"SlurmdSpoolDir={layout.spool_dir}/%n",
        f"SlurmctldPidFile={layout.run_dir}/slurmctld.pid",
        f"SlurmdPidFile={layout.run_dir}/slurmd-%n.pid",
        f"SlurmctldLogFile={layout.slurmctld_log}",
        f"SlurmdLogFile={layout.log_dir}/slurmd-%n.log",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        "SlurmdParameters=config_overrides",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/filetxt",
        f"JobCompLoc={layout.log_dir}/jobcomp.log",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        f"GresTypes={gres_types}",
        "MpiDefault=none",
        *(["JobSubmitPlugins=lua"] if spec.job_submit else []),
        "MailProg=/bin/true",
        "ReturnToService=2",
        "SchedulerParameters=sched_min_interval=100000,batch_sched_delay=0"
        + (f",bf_interval={spec.bf_interval_s}" if spec.bf_interval_s is not None else ""),
        "KillWait=5",
        # Clients give up on an unreachable controller after ~MessageTimeout-1 s (default 10):
        # shorter here so outage tests do not sit for 9 s per call.
        "MessageTimeout=5",
        "MinJobAge=300",
        "InactiveLimit=0",
        "Waittime=0",
    ]
    for name, port in zip(spec.node_names, ports):
        lines.append(
            f"NodeName={name} NodeHostname=localhost NodeAddr=127.0.0.1 Port={port} "
            f"CPUs={spec.cpus_per_node} RealMemory={spec.memory_mb} Gres={spec.gres} State=UNKNOWN"
        )
    lines.append(
        f"PartitionName={spec.partition} Nodes={spec.node_range} Default=YES MaxTime=INFINITE State=UP"
    )
    if spec.plain_partition is not None:
        lines.append(
            f"PartitionName={spec.plain_partition} Nodes={spec.node_range} Default=NO MaxTime=INFINITE State=UP"
        )
    return "\n".join(lines) + "\n"


def render_job_submit_lua(spec: DevClusterSpec) -> str:
    """The shipped job_submit.lua (etc/job_submit.lua) with this cluster's managed partition filled in."""
    text = (files("tesserae_slurm.data") / "job_submit.lua").read_text()
    line = 'local MANAGED_PARTITION = "tesserae"'
    if line not in text:
        raise ValueError("job_submit.lua: the MANAGED_PARTITION line is missing")
    return text.replace(line, f'local MANAGED_PARTITION = "{spec.partition}"', 1)


def render_gres_conf(spec: DevClusterSpec, layout: DevClusterLayout) -> str:
    last = spec.gpus_per_node - 1
    files = str(layout.fake_gpu(0)) if last == 0 else f"{layout.fakegpu_dir}/nvidia[0-{last}]"
    lines = [
        "# Fake GPUs: character devices aliasing /dev/null (mknod c 1 3); no NVML.",
        "AutoDetect=off",
        f"NodeName={spec.node_range} Name=gpu File={files}",
    ]
    if spec.shards_per_gpu:
        lines.append(f"NodeName={spec.node_range} Name=shard Count={spec.gpus_per_node * spec.shards_per_gpu}")
    return "\n".join(lines) + "\n"


def render_cgroup_conf() -> str:
    # No cgroup enforcement in the dev cluster (no systemd, shared host); CgroupPlugin=disabled
    # would make slurmd 22.05 exit, so only automount and constraints are turned off.
    return (
        "CgroupAutomount=no\n"
        "ConstrainCores=no\n"
        "ConstrainDevices=no\n"
        "ConstrainRAMSpace=no\n"
        "ConstrainSwapSpace=no\n"
    )
