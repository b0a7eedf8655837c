"""A real Slurm cluster on one host: munged, slurmctld and one slurmd per fake node.

All daemons run as plain background processes in their own sessions (no systemd), configured
from files under one root directory; their PIDs are recorded in a state file there so a later
process (`tesserae devcluster down`) can stop exactly them. Nothing is ever killed by name:
a PID is signalled only while its environment still holds this cluster's SLURM_CONF.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import stat
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from ..slurm.runner import RetryPolicy, SlurmError, SlurmRunner
from . import procs
from .errors import DevClusterError
from .install import find_binary
from .slurm_conf import (
    MAX_SOCKET_PATH,
    DevClusterLayout,
    DevClusterSpec,
    render_cgroup_conf,
    render_gres_conf,
    render_job_submit_lua,
    render_slurm_conf,
)
from .state import DevClusterState, DevClusterStatus

log = logging.getLogger(__name__)

CTLD = "slurmctld"
MUNGED = "munged"
# what slurmctld and slurmd log when their port is taken (strerror(EADDRINUSE)), and how often up()
# picks ports again for it
PORT_TAKEN = "Address already in use"
PORT_ATTEMPTS = 3


def _slurmd_key(node: str) -> str:
    return f"slurmd:{node}"


class DevCluster:
    """Start/stop a local Slurm with `nodes` fake nodes of `gpus_per_node` fake GPUs each.

    Ports default to a free consecutive block (checked, never hard-coded); pass `ctld_port` /
    `slurmd_base_port` to pin them — they are checked and `up()` fails clearly if taken.
    """

    def __init__(
        self,
        root_dir: str | os.PathLike[str],
        nodes: int = 4,
        gpus_per_node: int = 4,
        partition: str = "tesserae",
        *,
        shards_per_gpu: int = 2,
        ctld_port: int | None = None,
        slurmd_base_port: int | None = None,
        start_timeout_s: float = 60.0,
        job_submit: bool = True,
        plain_partition: str | None = None,
        bf_interval_s: int | None = None,
    ) -> None:
        self.root = Path(root_dir).expanduser().resolve()
        self.layout = DevClusterLayout(self.root)
        self.nodes = nodes
        self.gpus_per_node = gpus_per_node
        self.partition = partition
        self.shards_per_gpu = shards_per_gpu
        self.ctld_port = ctld_port
        self.slurmd_base_port = slurmd_base_port
        self.start_timeout_s = start_timeout_s
        self.job_submit = job_submit
        self.plain_partition = plain_partition
        self.bf_interval_s = bf_interval_s
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        DevClusterSpec(nodes=nodes, gpus_per_node=gpus_per_node, shards_per_gpu=shards_per_gpu, partition=partition,
                       plain_partition=plain_partition, bf_interval_s=bf_interval_s)

    # ---- what clients need -------------------------------------------------------------------

    @property
    def slurm_conf(self) -> Path:
        return self.layout.slurm_conf

    def env(self) -> dict[str, str]:
        """Environment variables a Slurm client needs to talk to this cluster."""
        return {"SLURM_CONF": str(self.slurm_conf)}

    @property
    def node_names(self) -> tuple[str, ...]:
        state = self._load_state()
        if state is not None:
            return tuple(state.nodes)
        return tuple(f"node{i}" for i in range(1, self.nodes + 1))

    def runner(self, *, timeout_s: float = 5.0, retries: int = 0) -> SlurmRunner:
        return SlurmRunner(self.env(), timeout_s=timeout_s, retry=RetryPolicy(retries=retries, backoff_s=0.2))

    # ---- lifecycle --------------------------------------------------------------------------

    def up(self) -> None:
        """Generate configs, start munged, slurmctld and the slurmds, wait for all nodes idle."""
        state = self._load_state()
        if state is not None and state.pids:
            if self._all_alive(state) and self._nodes_idle(state.nodes):
                log.info("dev cluster at %s is already up", self.root)
                return
            log.info("dev cluster at %s is partly up; restarting it", self.root)
            self.down()
        self._preflight()
        picked = self.ctld_port is None and self.slurmd_base_port is None
        for attempt in range(1, PORT_ATTEMPTS + 1):
            try:
                spec = self._start()
                break
            except DevClusterError as exc:
                # Ports picked free can be taken before the daemons bind them (by another cluster
                # starting beside this one); ports the caller named are the caller's to choose again.
                if not (picked and attempt < PORT_ATTEMPTS and PORT_TAKEN in str(exc)):
                    raise
                log.warning("dev cluster at %s: a picked port was taken before Slurm bound it; picking again",
                            self.root)
        log.info("dev cluster up: %d nodes, SLURM_CONF=%s", len(spec.node_names), self.slurm_conf)

    def _start(self) -> DevClusterSpec:
        """One start on freshly picked ports; on failure everything started is stopped again."""
        spec = self._spec()
        self._write_files(spec)
        state = DevClusterState(
            slurm_conf=str(self.slurm_conf),
            ctld_port=spec.ctld_port,
            slurmd_ports=list(spec.slurmd_ports),
            nodes=list(spec.node_names),
            partition=spec.partition,
        )
        state.save(self.layout.state_file)
        try:
            self._start_munged(state)
            self._start_ctld(state, clear_state=True)
            for node in spec.node_names:
                self._start_daemon(state, _slurmd_key(node), ["slurmd", "-D", "-N", node])
            self._wait_nodes_idle(state)
        except BaseException as exc:
            detail = str(exc)
            try:
                self.down()
            except DevClusterError as down_exc:  # keep the original failure first
                detail += f"\n(cleanup also failed: {down_exc})"
            if isinstance(exc, DevClusterError):
                raise DevClusterError(detail) from exc
            raise
        return spec

    def down(self) -> None:
        """Cancel this cluster's jobs, stop its daemons and any leftover job processes, and return only once
        every one of them is gone (DevClusterError naming any that would not go). Idempotent."""
        state = self._load_state()
        conf = str(self.slurm_conf)
        if state is not None and self._verified_pid(state, CTLD) is not None:
            self._cancel_all_jobs()
        # the slurmds first (together), then slurmctld, then munged, which the others need to the end
        stages: list[list[int]] = []
        if state is not None:
            for keys in ([k for k in state.pids if k.startswith("slurmd:")], [CTLD], [MUNGED]):
                stages.append([pid for key in keys if (pid := self._verified_pid(state, key)) is not None])
        daemons = [pid for stage in stages for pid in stage]
        # their children (slurmctld's slurmscriptd, scripts they run) are reparented once they die: note them now
        spawned = procs.descendants(daemons)
        for stage in stages:
            procs.terminate(stage)
        swept = self._sweep_job_processes(conf)
        for proc in self._procs.values():
            try:
                proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass
        self._procs.clear()
        left = procs.wait_gone([*daemons, *spawned, *swept], 5.0)
        if left:
            procs.signal_pids(left, signal.SIGKILL)
            left = procs.wait_gone(left, 5.0)
        if state is not None:
            state.pids = {}
            state.save(self.layout.state_file)
        if left:
            raise DevClusterError(f"processes of the dev cluster at {self.root} would not stop: "
                                  + ", ".join(procs.describe(p) for p in left))

    def status(self) -> DevClusterStatus:
        state = self._load_state()
        daemons: list[tuple[str, int | None, bool]] = []
        if state is not None:
            for key, pid in sorted(state.pids.items()):
                daemons.append((key, pid, self._verified_pid(state, key) is not None))
        up = bool(daemons) and all(alive for _, _, alive in daemons)
        try:
            sinfo = self.runner().run(["sinfo", "-N", "-o", "%N %P %t %G"]) if up else "(slurmctld not running)"
        except SlurmError as exc:
            sinfo = f"(sinfo failed: {exc})"
        return DevClusterStatus(self.root, self.slurm_conf, tuple(daemons), sinfo, up)

    def stop_controller(self) -> None:
        """Stop only slurmctld (simulates a controller outage); jobs and slurmds keep running."""
        state = self._require_state()
        pid = self._verified_pid(state, CTLD)
        if pid is not None:
            procs.terminate([pid])
        proc = self._procs.pop(CTLD, None)
        if proc is not None:
            proc.wait(timeout=5)
        state.pids.pop(CTLD, None)
        state.save(self.layout.state_file)

    def start_controller(self, timeout_s: float = 30.0) -> None:
        """Start slurmctld again, recovering the saved job state, and wait until it answers."""
        state = self._require_state()
        if self._verified_pid(state, CTLD) is not None:
            return
        self._start_ctld(state, clear_state=False)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            # After a restart nodes read `unk` until their slurmd registers again.
            if self._nodes_idle(state.nodes):
                return
            time.sleep(0.2)
        raise DevClusterError(
            f"slurmctld or its nodes did not come back within {timeout_s:g}s\n{self._log_tail([CTLD])}"
        )

    # ---- internals ---------------------------------------------------------------------------

    def _preflight(self) -> None:
        if os.geteuid() != 0:
            raise DevClusterError("the dev cluster must run as root (slurmd launches jobs, mknod makes fake GPUs)")
        missing = [b for b in ("slurmctld", "slurmd", "munged", "sinfo") if find_binary(b) is None]
        if missing:
            raise DevClusterError(
                f"Slurm binaries missing: {', '.join(missing)}; run scripts/install-slurm.sh "
                "or tesserae_slurm.devcluster.ensure_slurm_installed()"
            )
        if len(str(self.layout.munge_socket).encode()) > MAX_SOCKET_PATH:
            raise DevClusterError(f"dev cluster dir {self.root} is too long for a unix socket path; "
                                  "choose a shorter --dir")

    def _spec(self) -> DevClusterSpec:
        if self.ctld_port is not None:
            procs.check_ports_free([self.ctld_port])
            ctld_port = self.ctld_port
        else:
            ctld_port = -1
        if self.slurmd_base_port is not None:
            slurmd_ports = tuple(range(self.slurmd_base_port, self.slurmd_base_port + self.nodes))
            procs.check_ports_free(slurmd_ports)
        else:
            slurmd_ports = ()
        if ctld_port < 0 and not slurmd_ports:
            block = procs.pick_free_ports(self.nodes + 1)
            ctld_port, slurmd_ports = block[0], block[1:]
        elif ctld_port < 0:
            ctld_port = procs.pick_free_ports(1)[0]
        elif not slurmd_ports:
            slurmd_ports = tuple(p for p in procs.pick_free_ports(self.nodes + 1) if p != ctld_port)[: self.nodes]
        return DevClusterSpec(
            nodes=self.nodes,
            gpus_per_node=self.gpus_per_node,
            shards_per_gpu=self.shards_per_gpu,
            partition=self.partition,
            controller_host=socket.gethostname().split(".")[0],
            ctld_port=ctld_port,
            slurmd_ports=slurmd_ports,
            job_submit=self.job_submit,
            plain_partition=self.plain_partition,
            bf_interval_s=self.bf_interval_s,
        )

    def _write_files(self, spec: DevClusterSpec) -> None:
        lay = self.layout
        # Other local users submit jobs as on a site's cluster: they read the configs, reach munged's
        # socket and run their batch scripts from the spool; the munge key and saved state stay root's.
        for d in (lay.root, *lay.directories()):
            d.mkdir(parents=True, exist_ok=True)
            d.chmod(0o700 if d == lay.state_save_dir else 0o755)
        for node in spec.node_names:
            (lay.spool_dir / node).mkdir(exist_ok=True)
            (lay.spool_dir / node).chmod(0o755)
        lay.slurm_conf.write_text(render_slurm_conf(spec, lay))
        lay.gres_conf.write_text(render_gres_conf(spec, lay))
        lay.cgroup_conf.write_text(render_cgroup_conf())
        if spec.job_submit:
            lay.job_submit_lua.write_text(render_job_submit_lua(spec))
        else:
            lay.job_submit_lua.unlink(missing_ok=True)
        for f in (lay.slurm_conf, lay.gres_conf, lay.cgroup_conf):
            f.chmod(0o644)
        for i in range(spec.gpus_per_node):
            _make_fake_gpu(lay.fake_gpu(i))
        if not lay.munge_key.exists():
            fd = os.open(lay.munge_key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
            with os.fdopen(fd, "wb") as fh:
                fh.write(os.urandom(1024))

    def _start_munged(self, state: DevClusterState) -> None:
        lay = self.layout
        lay.munge_socket.unlink(missing_ok=True)
        argv = [
            "munged", "-F", "--force",
            "-S", str(lay.munge_socket),
            f"--key-file={lay.munge_key}",
            f"--log-file={lay.munged_log}",
            f"--pid-file={lay.munge_dir / 'munged.pid'}",
            f"--seed-file={lay.munge_dir / 'munged.seed'}",
        ]  # fmt: skip
        self._start_daemon(state, MUNGED, argv)
        self._wait_for(lambda: lay.munge_socket.exists(), 10.0, "munged did not create its socket", [MUNGED])

    def _start_ctld(self, state: DevClusterState, *, clear_state: bool) -> None:
        argv = ["slurmctld", "-D", "-c" if clear_state else "-i"]
        self._start_daemon(state, CTLD, argv)
        self._wait_for(
            lambda: procs.port_accepts(state.ctld_port),
            20.0,
            f"slurmctld did not listen on port {state.ctld_port}",
            [CTLD],
        )

    def _start_daemon(self, state: DevClusterState, key: str, argv: list[str]) -> None:
        exe = find_binary(argv[0])
        if exe is None:
            raise DevClusterError(f"{argv[0]}: not installed")
        console = self.layout.log_dir / f"{key.replace(':', '-')}.console"
        env = dict(os.environ, SLURM_CONF=str(self.slurm_conf))
        with open(console, "ab") as out:
            proc = subprocess.Popen(
                [exe, *argv[1:]],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.root,
                start_new_session=True,
            )
        self._procs[key] = proc
        state.pids[key] = proc.pid
        state.save(self.layout.state_file)
        log.debug("started %s pid %d", key, proc.pid)

    def _wait_for(self, ready: Callable[[], bool], timeout_s: float, what: str, keys: list[str]) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if ready():
                return
            dead = [k for k in keys if k in self._procs and self._procs[k].poll() is not None]
            if dead:
                raise DevClusterError(f"{what}: {', '.join(dead)} exited early\n{self._log_tail(keys)}")
            time.sleep(0.05)
        raise DevClusterError(f"{what} within {timeout_s:g}s\n{self._log_tail(keys)}")

    def _wait_nodes_idle(self, state: DevClusterState) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        last = ""
        while time.monotonic() < deadline:
            states = self._node_states()
            last = " ".join(f"{n}={s}" for n, s in sorted(states.items())) or "(no answer)"
            if all(states.get(n) == "idle" for n in state.nodes):
                return
            dead = [k for k, p in self._procs.items() if p.poll() is not None]
            if dead:
                raise DevClusterError(f"dev cluster start failed: {', '.join(dead)} exited\n{self._log_tail(dead)}")
            time.sleep(0.2)
        keys = [CTLD, *(_slurmd_key(n) for n in state.nodes)]
        raise DevClusterError(
            f"nodes not idle after {self.start_timeout_s:g}s (last sinfo: {last})\n{self._log_tail(keys)}"
        )

    def _node_states(self) -> dict[str, str]:
        try:
            out = self.runner(timeout_s=3).run(["sinfo", "-h", "-N", "-o", "%N %t"])
        except SlurmError:
            return {}
        states: dict[str, str] = {}
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2:
                states[parts[0]] = parts[1]
        return states

    def _nodes_idle(self, nodes: list[str]) -> bool:
        states = self._node_states()
        return bool(states) and all(states.get(n) in ("idle", "mix", "alloc", "comp") for n in nodes)

    def _cancel_all_jobs(self) -> None:
        runner = self.runner(timeout_s=5)
        try:
            ids = runner.run(["squeue", "-h", "-o", "%i"]).split()
            if ids:
                runner.run(["scancel", *ids])
                deadline = time.monotonic() + 8.0
                while time.monotonic() < deadline:
                    if not runner.run(["squeue", "-h", "-t", "RUNNING,COMPLETING,CONFIGURING", "-o", "%i"]).split():
                        break
                    time.sleep(0.2)
        except SlurmError as exc:
            log.warning("could not cancel dev cluster jobs cleanly: %s", exc)

    def _sweep_job_processes(self, conf: str) -> list[int]:
        """Kill slurmstepd trees and orphaned job processes of this cluster; return the PIDs signalled.

        A job process carries SLURM_JOB_ID and this cluster's SLURM_CONF. Its slurmstepd carries SLURM_CONF
        on 22.05 but an empty environment on 24.11 and later: there it is known as the job process's parent."""
        protected = procs.protected_pids()
        stepds: list[int] = []
        orphans: list[int] = []
        for pid in procs.all_pids():
            if pid in protected or not procs.belongs_to(pid, conf):
                continue
            if procs.proc_comm(pid) == "slurmstepd":
                stepds.append(pid)
            elif "SLURM_JOB_ID" in procs.proc_environ(pid):
                orphans.append(pid)
                parent = procs.proc_parent(pid)
                if parent is not None and procs.proc_comm(parent) == "slurmstepd" and procs.same_root(parent):
                    stepds.append(parent)
        victims = [p for p in dict.fromkeys([*stepds, *procs.descendants(stepds), *orphans]) if p not in protected]
        if victims:
            log.info("killing %d leftover job processes of %s", len(victims), self.root)
            procs.signal_pids(victims, signal.SIGKILL)
            procs.wait_gone(victims, 3.0)
        return victims

    def _verified_pid(self, state: DevClusterState, key: str) -> int | None:
        """The recorded PID of `key` if it is alive and still one of ours (guards PID reuse)."""
        pid = state.pids.get(key)
        if pid is None or not procs.pid_alive(pid):
            return None
        if not procs.belongs_to(pid, state.slurm_conf):
            return None
        return pid

    def _all_alive(self, state: DevClusterState) -> bool:
        expected = {MUNGED, CTLD, *(_slurmd_key(n) for n in state.nodes)}
        return all(self._verified_pid(state, k) is not None for k in expected)

    def _load_state(self) -> DevClusterState | None:
        return DevClusterState.load(self.layout.state_file)

    def _require_state(self) -> DevClusterState:
        state = self._load_state()
        if state is None:
            raise DevClusterError(f"no dev cluster at {self.root} (run `tesserae devcluster up` first)")
        return state

    def _log_tail(self, keys: list[str], lines: int = 8) -> str:
        chunks = []
        for key in keys:
            if key == CTLD:
                path = self.layout.slurmctld_log
            elif key == MUNGED:
                path = self.layout.munged_log
            else:
                path = self.layout.slurmd_log(key.split(":", 1)[1])
            console = self.layout.log_dir / f"{key.replace(':', '-')}.console"
            for p in (path, console):
                tail = _tail(p, lines)
                if tail:
                    chunks.append(f"--- {p} (last {lines} lines)\n{tail}")
        return "\n".join(chunks) or "(no daemon logs written)"


def _tail(path: Path, lines: int) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


def _make_fake_gpu(path: Path) -> None:
    """A character device aliasing /dev/null (major 1, minor 3): slurmd needs a File= per GPU."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        st = None
    if st is not None:
        if stat.S_ISCHR(st.st_mode):
            return
        path.unlink()
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except OSError as exc:
        raise DevClusterError(f"mknod {path} c 1 3 failed ({exc.strerror}); the dev cluster needs CAP_MKNOD") from exc


def env_for(root_dir: str | os.PathLike[str]) -> Mapping[str, str]:
    """Client environment for a dev cluster at `root_dir` without constructing it."""
    return {"SLURM_CONF": str(DevClusterLayout(Path(root_dir).expanduser().resolve()).slurm_conf)}
