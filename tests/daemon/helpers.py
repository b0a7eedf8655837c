"""Test helpers for the daemon on the real dev cluster: config files, tsbatch, the daemon, job logs."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from backend_under_test import slurm_backend
from waiting import holds_for, wait_for  # noqa: F401 - the live daemon tests import them from here

from tesserae_slurm.site.config import SiteConfig
from tesserae_slurm.site.load import load_config
from tesserae_slurm.site.connect import backend_from_config
from tesserae_slurm.daemon.loop import Daemon
from tesserae_slurm.daemon.state.store import Store
from tesserae_slurm.devcluster import DevCluster
from tesserae_slurm.model.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
TOY = ROOT / "jobscripts" / "toy.sbatch"
BIN = Path(sys.executable).parent
TICK = ROOT / "tests" / "daemon" / "jobs" / "tick.sbatch"


def payload() -> str:
    """The job program the end-to-end tests run: `torch` (jobscripts/toy_train.py, the default) or `plain`
    (tests/daemon/jobs/tick.py: same events, checkpoint and resume, no torch). The Slurm lanes without
    torch set TESSERAE_TEST_PAYLOAD=plain; elsewhere a missing torch is a failure, never a quiet switch."""
    kind = os.environ.get("TESSERAE_TEST_PAYLOAD", "torch")
    if kind not in ("torch", "plain"):
        raise AssertionError(f"TESSERAE_TEST_PAYLOAD={kind!r}: expected 'torch' or 'plain'")
    if kind == "torch" and importlib.util.find_spec("torch") is None:
        raise AssertionError("torch is not installed: the torch payload needs it (./dev test installs it; "
                             "lanes without torch set TESSERAE_TEST_PAYLOAD=plain)")
    return kind


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out.get(k, {}), v) if isinstance(v, Mapping) and v else v  # {} replaces
    return out


class Env:
    """One test's world: the shared cluster, its own config + state database + job output directory."""

    def __init__(self, cluster: DevCluster, tmp: Path) -> None:
        self.cluster, self.tmp = cluster, tmp
        self.out = tmp / "out"
        self.out.mkdir()
        self.db = tmp / "state.db"
        self.config = tmp / "tesserae.yaml"
        self.write_config()

    def write_config(self, **over: Any) -> Path:
        base = {
            "slurm": {"partition": "tesserae", "command_timeout_s": 8, "retries": 1, "start_timeout_s": 60,
                      "backend": slurm_backend()},
            # the shipped default policy, so the live tests run what a site gets
            "scheduler": {"policy": SiteConfig().scheduler.policy, "round_seconds": 2,
                          "policy_options": {"queue_limits": [1.0]}},
            # every move free, as the paper plans: most live tests need the daemon to stop and move jobs of
            # seconds, which moves that pay for themselves would rightly not do (the start-between tests turn
            # them on; their costs are unit-tested in tests/daemon/round and measured by `tesserae bench moves`)
            "moves": {"enabled": False},
            # a stop ends once the payload has checkpointed and exited (the torch payload does; tick.py's
            # default waits itself, so its stops take the grace)
            "preemption": {"grace_seconds": 20, "stop_records_dir": str(self.tmp / "stops")},
            "mps": {"thread_percentage": 50},
            "state": {"database": str(self.db)},
            "metrics": {"listen": ""},
            "http": {"listen": ""},  # test_web_live.py turns it on (port 0); other tests leave port 9479 free
            "log_level": "INFO",
        }
        self.config.write_text(yaml.safe_dump(_merge(base, over)))
        return self.config

    def os_env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.cluster.env())
        env.update({"TESSERAE_PYTHON": sys.executable, "TOY_THREADS": "1", "TESSERAE_CONFIG": str(self.config),
                    "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}"})
        env.pop("TESSERAE_FAILPOINTS", None)
        env.update(extra)
        return env

    # ---- users ---------------------------------------------------------------------------------------
    def tsbatch(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([str(BIN / "tsbatch"), *args], env=self.os_env(), capture_output=True, text=True,
                              timeout=60, check=False)
        if check and proc.returncode != 0:
            raise AssertionError(f"tsbatch {args} failed: {proc.stderr}")
        return proc

    def submit_toy(self, gpus: int, steps: int, *, model: str | None = "DCGAN", batch: str = "32",
                   step_time: float = 0.05, name: str = "toy", extra: tuple[str, ...] = ()) -> str:
        """A job running the lane's payload() through tsbatch (the installed console script)."""
        opts = ["--gpus", str(gpus)] + (["--model", model, "--batch-size", batch] if model else ["--no-profile"])
        script = TOY if payload() == "torch" else TICK  # same arguments: OUTDIR STEPS STEP_TIME
        proc = self.tsbatch("--parsable", *opts, "-J", name, "-o", str(self.out / "%j.out"), *extra,
                            str(script), str(self.out), str(steps), str(step_time))
        return proc.stdout.strip()

    # ---- the daemon ----------------------------------------------------------------------------------
    def daemon(self, dry_run: bool = False) -> Daemon:
        cfg = load_config(self.config)
        d = Daemon(cfg, backend_from_config(cfg, self.cluster.env()), Store.open(cfg.state.database), dry_run=dry_run)
        d.start()
        return d

    def daemon_cli(self, *args: str, timeout: float = 120, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(BIN / "tesserae"), "daemon", "--config", str(self.config), *args],
                              env=self.os_env(**extra), capture_output=True, text=True, timeout=timeout, check=False)

    def tesserae(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(BIN / "tesserae"), *args, "--db", str(self.db)], env=self.os_env(),
                              capture_output=True, text=True, timeout=60, check=False)

    def store(self) -> Store:
        return Store.open(self.db, read_only=True)

    def round_done(self) -> bool:
        """A running daemon has finished a round (its first can take 15 s: numba compiles on a cold cache)."""
        try:
            return self.db.exists() and any(r.finished_at is not None for r in self.store().rounds())
        except InputError:  # the file exists, its schema not yet
            return False

    # ---- Slurm and job logs --------------------------------------------------------------------------
    def squeue(self) -> dict[str, dict[str, str]]:
        """job id -> {state, reason, nodes, admin_comment, restarts}, from squeue --json (finished jobs too).

        Read here, apart from the product's parser, as the tests' own view of Slurm. `--states=all`: 23.02+
        list only active jobs without it (22.05 ignores it and lists all); there `job_state` is a list of
        the base state and flags (["PENDING", "COMPLETING"]), read as 22.05 printed it (_state_string)."""
        out = subprocess.run(["squeue", "--json", "--states=all"], env=self.os_env(), capture_output=True, text=True,
                             timeout=30, check=True).stdout
        jobs = {}
        for j in json.loads(out)["jobs"]:
            state = _state_string(j["job_state"])
            jobs[str(j["job_id"])] = {"state": state, "reason": j.get("state_reason", ""),
                                      "nodes": j.get("nodes", ""), "admin_comment": j.get("admin_comment", ""),
                                      "restarts": j.get("restart_cnt", 0), "name": j.get("name", ""),
                                      "comment": j.get("comment", "")}
        return jobs

    def final_states(self) -> dict[str, str]:
        """job id -> state as Slurm records it, finished jobs included: squeue while slurmctld keeps the job,
        then the jobcomp log (its last record), since squeue drops a job `MinJobAge` (300 s) after it ends,
        and a long scenario under load may outlive that for its first jobs (one suspect for a 24.11 CI failure)."""
        states: dict[str, str] = {}
        log = self.cluster.layout.log_dir / "jobcomp.log"
        if log.exists():
            for line in log.read_text().splitlines():
                fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
                if "JobId" in fields and "JobState" in fields:
                    states[fields["JobId"]] = fields["JobState"]
        states.update({j: row["state"] for j, row in self.squeue().items()})
        return states

    def squeue_ids(self, active: bool = False) -> set[str]:
        out = subprocess.run(["squeue", "-h", "-o", "%i %T"], env=self.os_env(), capture_output=True, text=True,
                             timeout=30, check=False).stdout
        ids = set()
        for line in out.splitlines():
            jid, state = line.split()
            if not active or state in ("RUNNING", "COMPLETING", "CONFIGURING"):
                ids.add(jid)
        return ids

    def events(self, job: str) -> list[dict[str, Any]]:
        path = self.out / f"events-{job}.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def job_output(self, job: str) -> str:
        p = self.out / f"{job}.out"
        return p.read_text() if p.exists() else ""


# Slurm's job_state_string(): these flags name the state ahead of the base state (a requeue-held job is
# COMPLETING until its processes are gone, then PENDING).
_FLAG_STATES = ("COMPLETING", "STAGE_OUT", "CONFIGURING", "RESIZING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD",
                "SPECIAL_EXIT", "STOPPED", "REVOKED", "RESV_DEL_HOLD", "SIGNALING")


def _state_string(raw: str | list[str]) -> str:
    """22.05's `"RUNNING"` as is; 23.02+'s list `["PENDING", "COMPLETING"]` as 22.05 would print it."""
    if isinstance(raw, str):
        return raw
    return next((f for f in _FLAG_STATES if f in raw), raw[0] if raw else "")


def progressed(env: Env, job: str, step: int = 1) -> bool:
    return any(e["event"] in ("progress", "checkpoint", "done") and e["step"] >= step for e in env.events(job))


def done(env: Env, job: str) -> bool:
    return any(e["event"] == "done" for e in env.events(job))


def completed(env: Env, *jobs: str) -> bool:
    """Slurm itself lists the jobs as COMPLETED (their processes are gone, not just their payload)."""
    return not not_completed(env, *jobs)


def not_completed(env: Env, *jobs: str) -> dict[str, str]:
    """job id -> Slurm's state, for the jobs Slurm does not record as COMPLETED ('unknown' if nowhere)."""
    states = env.final_states()
    return {j: states.get(j, "unknown") for j in jobs if states.get(j) != "COMPLETED"}


def submit_tick(env: Env, gpus: int, steps: int, *args: str, name: str = "tick", step_time: float = 0.1,
                model: str = "", batch: str = "", on_signal: str = "wait") -> str:
    """tsbatch's own code path (parse, validate, sbatch) in this process: no interpreter start per job.
    Without ``model`` the job is submitted with --no-profile (placed alone, never packed). ``on_signal``:
    what the job does on the checkpoint signal (tick.py): ``wait`` (its payload waits for the requeue-hold),
    ``checkpoint`` (its payload exits; the launcher waits for the requeue-hold and records the checkpoint
    when the daemon asks: an early stop), ``exit`` (the job ends), ``ignore``."""
    from tesserae_slurm.site.load import load_config
    from tesserae_slurm.tsbatch.submit import prepare

    cfg = load_config(env.config, check_policy=False)
    backend = backend_from_config(cfg, env.cluster.env())
    shape = ["--model", model, "--batch-size", batch] if model else ["--no-profile"]
    prepared, _ = prepare(["--gpus", str(gpus), *shape, "-J", name, "-o", str(env.out / "%j.out"),
                           str(TICK), str(env.out), str(steps), str(step_time), *args], lambda _c: backend,
                          lambda _p: cfg)
    # a job that ends on the signal: its launcher does not wait for a requeue-hold either
    wait = {"TESSERAE_REQUEUE_WAIT": "0"} if on_signal == "exit" else {}
    tick = "exit" if on_signal == "checkpoint" else on_signal
    job_env = {**prepared.env, **wait, "TICK_ON_SIGNAL": tick, "TESSERAE_PYTHON": sys.executable,
               "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    return str(backend.submit(list(prepared.script), prepared.extra_args, env=job_env))


def consistency_problems(env: Env, jobs: list[str]) -> list[str]:
    """Everything that would mean a job lost, placed twice, or a database that disagrees with Slurm."""
    from tesserae_slurm.daemon.state.store import PLACED_STATES

    problems: list[str] = []
    store = env.store()
    rows = {r.job_id: r for r in store.jobs()}
    slurm = env.squeue()
    left = [a for a in store.actions() if a.status == "intent"]
    if left:
        problems.append(f"actions still in intent: {[(a.round_id, a.kind, a.job_id) for a in left]}")
    holders: dict[tuple[str, int], set[str]] = {}
    for j in jobs:
        r, s = rows.get(j), slurm.get(j)
        if r is None or s is None:
            problems.append(f"job {j} lost (db={r is not None}, slurm={s is not None})")
            continue
        if r.state in ("LOST", "FAILED", "CANCELLED") or s["state"] in ("FAILED", "CANCELLED"):
            problems.append(f"job {j}: db {r.state}, slurm {s['state']}")
        slurm_active = s["state"] in ("RUNNING", "CONFIGURING", "COMPLETING") or (
            s["state"] == "PENDING" and s["reason"] not in ("JobHeldUser", "JobHeldAdmin"))
        if (r.state in PLACED_STATES) != slurm_active:
            problems.append(f"job {j}: db {r.state} but slurm {s['state']} ({s['reason']})")
        if r.state in PLACED_STATES:
            if s["admin_comment"] != r.assignment:
                problems.append(f"job {j}: AdminComment differs from the recorded assignment")
            for node, idx in parse_gpus_str(r.gpus).items():
                for g in idx:
                    holders.setdefault((node, g), set()).add(j)
    for gpu, who in holders.items():
        if len(who) > 2:
            problems.append(f"GPU {gpu} held by {sorted(who)}")
        elif len(who) == 2:
            a, b = sorted(who)
            if rows[a].packed_with != b or rows[b].packed_with != a:
                problems.append(f"GPU {gpu} shared by {a} and {b}, which are not a packed pair")
    return problems


def parse_gpus_str(text: str) -> dict[str, tuple[int, ...]]:
    from tesserae_slurm.daemon.state.gpuset import parse_gpus
    return parse_gpus(text)
