"""Users cannot bypass the daemon or evict others, tried as a second Unix user on the real dev cluster.

The test makes a Unix user, has it submit and release jobs with Slurm's own commands (as a user on a
site's login node would), and removes it afterwards. The dev cluster runs the shipped job_submit.lua.
"""

from __future__ import annotations

import json
import os
import pwd
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tesserae_slurm.site.load import load_config
from tesserae_slurm.site.connect import backend_from_config
from tesserae_slurm.tsbatch.submit import prepare

from .helpers import BIN, Env, _state_string, holds_for, submit_tick, wait_for

pytestmark = [pytest.mark.slurm_live, pytest.mark.every_release]

PLAIN = '#!/bin/bash\necho "start $(date +%s.%N) job=$SLURM_JOB_ID gpus=${CUDA_VISIBLE_DEVICES-unset}"\nsleep 600\n'


@dataclass
class User:
    name: str
    home: Path
    env: Env

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        """A Slurm command as this user: its own uid, HOME and cwd; only SLURM_CONF from the test."""
        return subprocess.run(["runuser", "-u", self.name, "--", "env", "-i", f"HOME={self.home}",
                               "PATH=/usr/bin:/bin", f"SLURM_CONF={self.env.cluster.slurm_conf}", *argv],
                              cwd=self.home, capture_output=True, text=True, timeout=60, check=False)

    @property
    def script(self) -> str:
        return str(self.home / "plain.sh")

    def tsbatch_args(self, gpus: int) -> list[str]:
        """What tsbatch hands to sbatch for this user's script (the user cannot run the test's Python)."""
        cfg = load_config(self.env.config, check_policy=False)
        backend = backend_from_config(cfg, self.env.cluster.env())
        prepared, _ = prepare(["--gpus", str(gpus), "--no-profile", "-o", f"{self.home}/%j.out", self.script],
                              lambda _c: backend, lambda _p: cfg)
        return ["sbatch", "--parsable", *prepared.extra_args, self.script]

    def submit_managed(self, gpus: int = 1) -> str:
        proc = self.run(*self.tsbatch_args(gpus))
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    def starts(self, job: str) -> list[float]:
        out = self.home / f"{job}.out"
        text = out.read_text() if out.exists() else ""
        return [float(line.split()[1]) for line in text.splitlines() if line.startswith("start ")]


@pytest.fixture
def user(env: Env) -> Iterator[User]:
    name = f"tsby{os.getpid() % 100000}"
    subprocess.run(["useradd", "-m", "-s", "/bin/bash", name], check=True, capture_output=True)
    home = Path(pwd.getpwnam(name).pw_dir)
    u = User(name, home, env)
    try:
        (home / "plain.sh").write_text(PLAIN)
        os.chown(home / "plain.sh", pwd.getpwnam(name).pw_uid, pwd.getpwnam(name).pw_gid)
        (home / "plain.sh").chmod(0o755)
        yield u
    finally:
        subprocess.run(["scancel", "-u", name], env=env.os_env(), capture_output=True, timeout=30, check=False)
        wait_for(lambda: not _user_jobs(env, name, active=True), 60, f"the jobs of {name} to end",
                 explain=lambda: f"still active: {_user_jobs(env, name, active=True)}")
        subprocess.run(["userdel", "-r", name], capture_output=True, check=False)


def _user_jobs(env: Env, name: str, active: bool = False) -> list[str]:
    states = "RUNNING,COMPLETING,CONFIGURING" if active else "all"
    out = subprocess.run(["squeue", "-h", "-u", name, "-t", states, "-o", "%i"], env=env.os_env(),
                         capture_output=True, text=True, timeout=30, check=False).stdout
    return out.split()


def _job(env: Env, job: str) -> dict:
    """The job's raw squeue --json record, its `job_state` read as 22.05 prints it (23.02+ give a list)."""
    out = subprocess.run(["squeue", "--json", "--states=all"], env=env.os_env(), capture_output=True, text=True,
                         timeout=30, check=True).stdout
    j = next(j for j in json.loads(out)["jobs"] if str(j["job_id"]) == job)
    return {**j, "job_state": _state_string(j["job_state"])}


def test_job_submit_lua_admits_only_tsbatch_jobs_to_the_managed_partition(env: Env, user: User) -> None:
    tagged = user.tsbatch_args(1)
    refused = {
        "pinned to a node (the eviction attack)": (["sbatch", "-p", "tesserae", "-w", "node1", user.script],
                                                   "submit jobs with tsbatch"),
        "untagged": (["sbatch", "-p", "tesserae", user.script], "tsbatch"),
        "untagged, default partition": (["sbatch", user.script], "tsbatch"),
        "tagged, pinned": ([*tagged[:-1], "-w", "node2", user.script], "choosing nodes"),
        "tagged, --exclusive": ([*tagged[:-1], "--exclusive", user.script], "--exclusive"),
        "tagged, --gres=gpu:1": ([*tagged[:-1], "--gres=gpu:1", user.script], "GPU requests"),
        "tagged, --gpus=1": ([*tagged[:-1], "--gpus=1", user.script], "GPU requests"),
        "tagged, --no-requeue": ([*tagged[:-1], "--no-requeue", user.script], "requeueable"),
    }
    for what, (argv, words) in refused.items():
        proc = user.run(*argv)
        assert proc.returncode != 0, f"{what}: accepted ({proc.stdout})"
        assert "scheduled by tesserae" in proc.stderr and words in proc.stderr, (what, proc.stderr)
    assert _user_jobs(env, user.name) == []

    job = user.submit_managed(1)  # tsbatch's own arguments go through
    assert _job(env, job)["state_reason"] == "JobHeldUser"
    unheld = user.run(*[a for a in tagged if a != "--hold"])  # a tagged job is held even without --hold
    assert unheld.returncode == 0, unheld.stderr
    assert _job(env, unheld.stdout.strip())["state_reason"] == "JobHeldUser"
    # nor can the tag be dropped afterwards (a foreign job in the partition), or GPUs asked for
    assert user.run("scontrol", "update", f"JobId={job}", "Comment=mine").returncode != 0
    assert user.run("scontrol", "update", f"JobId={job}", "TresPerNode=gres:gpu:1").returncode != 0
    assert _job(env, job)["comment"].startswith("tesserae:v1:")


def test_a_user_cannot_start_a_managed_job_without_the_daemon(env: Env, user: User) -> None:
    # no starts between rounds: the daemon would start the evicted job itself (where it decides, which is
    # allowed), and this test checks that nobody else can
    env.write_config(slurm={"guard_seconds": 1, "poll_seconds": 0}, scheduler={"round_seconds": 600})
    daemon = subprocess.Popen([str(BIN / "tesserae"), "daemon", "--config", str(env.config)], env=env.os_env(),
                              stdout=subprocess.DEVNULL, stderr=open(env.tmp / "daemon.log", "w"))
    try:
        wait_for(env.round_done, 90, "the daemon's first round")
        # submit and release while the daemon is not looking (paused): Slurm starts the job itself. Its owner's
        # release is refused (job_submit.lua); root's goes through, as an owner's would without job_submit.lua
        daemon.send_signal(signal.SIGSTOP)
        try:
            job = user.submit_managed(1)
            assert user.run("scontrol", "release", job).returncode != 0
            subprocess.run(["scontrol", "release", job], env=env.os_env(), check=True, capture_output=True)
            wait_for(lambda: _job(env, job)["job_state"] == "RUNNING" and bool(user.starts(job)), 30,
                     "the hand-released job to run")
            assert _job(env, job)["admin_comment"] == ""  # no assignment from the daemon
        finally:
            daemon.send_signal(signal.SIGCONT)
        resumed = time.time()
        # stopped at once (requeue-held: no longer RUNNING); admin-held once Slurm has ended its processes
        # and requeued it (KillWait and the requeue take a few seconds more, and vary by release)
        wait_for(lambda: _job(env, job)["job_state"] != "RUNNING", 30, "the daemon to stop it",
                 every=0.1)
        stopped_s = time.time() - resumed
        wait_for(lambda: _job(env, job)["state_reason"] == "JobHeldAdmin", 30, "the daemon to hold it", every=0.1)
        held_s = time.time() - resumed
        # by the guard check (every second), not by the next round (600 s); the margin is for a loaded machine
        assert stopped_s < 20, f"a hand-started job was stopped only {stopped_s:.1f} s after the daemon looked again"
        events = " ".join(e.message for e in env.store().events(limit=100))
        assert "running without the daemon's current assignment" in events
        print(f"hand-started job stopped {stopped_s:.2f} s and admin-held {held_s:.2f} s after the daemon resumed")
        # held by the daemon as an administrator: its owner cannot release it (job_submit.lua refuses it
        # first; Slurm itself would answer "Access/permission denied")
        again = user.run("scontrol", "release", job)
        assert again.returncode != 0, again
        holds_for(lambda: (j := _job(env, job))["job_state"] == "PENDING" and j["state_reason"] == "JobHeldAdmin",
                  3, "the admin hold after the owner's refused release", explain=lambda: str(_job(env, job)))
        runs_before = len(user.starts(job))

        # what the daemon's stop phase leaves (requeue-hold: a user hold) is made an admin hold too
        subprocess.run(["scontrol", "update", f"JobId={job}", "NodeList=node1", "StartTime=now"],
                       env=env.os_env(), check=True, capture_output=True)
        subprocess.run(["scontrol", "release", job], env=env.os_env(), check=True, capture_output=True)
        wait_for(lambda: _job(env, job)["job_state"] == "RUNNING" or _job(env, job)["state_reason"] ==
                 "JobHeldAdmin", 15, "the operator-released job to run")
        subprocess.run(["scontrol", "requeuehold", "Incomplete", job], env=env.os_env(), capture_output=True,
                       check=False)
        wait_for(lambda: _job(env, job)["state_reason"] == "JobHeldAdmin", 15, "the requeue-held job to be secured")
        assert user.run("scontrol", "release", job).returncode != 0
        holds_for(lambda: _job(env, job)["job_state"] == "PENDING", 2, "the secured job pending",
                  explain=lambda: str(_job(env, job)))
        assert len(user.starts(job)) <= runs_before + 1  # only the operator's start ran
        store = env.store()
        assert job in json.loads(store.get_kv("daemon_admin_holds") or b"[]")

        # and with the daemon running as usual: submit and release at once, five times over (refused by
        # job_submit.lua; were it accepted, the daemon would hold the job again within guard_seconds)
        for _ in range(5):
            other = user.submit_managed(1)
            released = user.run("scontrol", "release", other).returncode == 0
            wait_for(lambda: _job(env, other)["state_reason"] == "JobHeldAdmin", 15, "the daemon to hold it",
                     every=0.1)
            held_at = time.time()
            assert not released, "the owner's release was accepted"  # refused by job_submit.lua
            # so never started: no output for a second (a start would write its line within it)
            holds_for(lambda: not user.starts(other), 1, f"job {other} never running",
                      explain=lambda: f"ran {held_at - user.starts(other)[0]:.2f} s after the hold")
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(timeout=60)
        except subprocess.TimeoutExpired:
            daemon.kill()


def test_an_administrators_hold_is_respected_but_the_daemons_own_is_not_mistaken_for_one(env: Env) -> None:
    d = env.daemon()
    mine, admins = submit_tick(env, 1, 3000, name="mine"), submit_tick(env, 1, 3000, name="admins")
    subprocess.run(["scontrol", "hold", admins], env=env.os_env(), check=True, capture_output=True)  # by hand
    d.guard_check()  # the check between rounds makes the daemon's own hold an administrator's hold as well
    assert _job(env, mine)["state_reason"] == _job(env, admins)["state_reason"] == "JobHeldAdmin"
    d.look(None)
    rows = {r.job_id: r for r in env.store().jobs()}
    assert "administrator" in rows[admins].reason and "administrator" not in rows[mine].reason
    result = d.run_round()
    assert result.status == "applied", result.error
    placed = {p.job_id for p in env.store().placements(result.round_id)}
    assert mine in placed and admins not in placed
    row = env.store().job(admins)
    assert row is not None and "administrator" in row.reason


def test_a_foreign_job_blocks_only_its_own_gpus_and_is_named(env: Env, user: User) -> None:
    subprocess.run(["scontrol", "create", "PartitionName=other", "Nodes=node2", "State=UP"], env=env.os_env(),
                   check=True, capture_output=True)
    try:
        cpu_only = user.run("sbatch", "--parsable", "-p", "other", user.script)
        gpus = user.run("sbatch", "--parsable", "-p", "other", "--gres=gpu:2", user.script)
        assert cpu_only.returncode == 0 and gpus.returncode == 0, (cpu_only.stderr, gpus.stderr)
        foreign = gpus.stdout.strip()
        wait_for(lambda: len(_user_jobs(env, user.name, active=True)) == 2, 30, "the foreign jobs to run")
        taken = _job(env, foreign)["gres_detail"][0]
        assert "gpu" in taken, taken

        d = env.daemon()
        big = [submit_tick(env, 4, 3000, name=f"big{i}") for i in range(2)]
        small = submit_tick(env, 2, 3000, name="small")
        result = d.run_round()
        assert result.status == "applied", result.error
        placed = {p.job_id: p.gpus for p in env.store().placements(result.round_id)}
        # node2 keeps its two free GPUs for the managed jobs: the 2-GPU job runs there, beside the foreign one
        assert placed.get(small, "").startswith("node2:"), placed
        from .helpers import parse_gpus_str
        foreign_idx = {int(x) for x in taken.split("IDX:")[1].rstrip(")").replace("-", ",").split(",")}
        assert not set(parse_gpus_str(placed[small])["node2"]) & foreign_idx
        waiting = [j for j in big if j not in placed]
        assert len(waiting) == 1 and [j for j in big if j in placed], placed
        holder = f"job {foreign} (user {user.name}, not managed)"
        explain = env.tesserae("explain", waiting[0])
        assert holder in explain.stdout and "node2: 2 GPUs held by" in explain.stdout, explain.stdout
        show = env.tesserae("round", "show", str(result.round_id))
        assert holder in show.stdout and f"foreign:{foreign}" in show.stdout, show.stdout  # in the map, too
        assert f"job {cpu_only.stdout.strip()}" not in show.stdout  # holds no GPU: blocks nothing
    finally:
        subprocess.run(["scancel", "-p", "other"], env=env.os_env(), capture_output=True, check=False)
        wait_for(lambda: not _user_jobs(env, user.name, active=True), 60, f"the jobs of {user.name} to end",
                 explain=lambda: f"still active: {_user_jobs(env, user.name, active=True)}")
        subprocess.run(["scontrol", "delete", "PartitionName=other"], env=env.os_env(), capture_output=True,
                       check=False)


def test_a_job_the_daemon_preempts_is_left_admin_held(env: Env) -> None:
    from .helpers import progressed
    d = env.daemon()
    first = submit_tick(env, 8, 3000, name="first", step_time=0.05)
    assert d.run_round().status == "applied"
    wait_for(lambda: progressed(env, first, 20), 60, "the first job to run")
    second = submit_tick(env, 8, 3000, name="second", step_time=0.05)
    result = d.run_round()  # Tiresias (queue limit 1 GPU-s) puts the fresh job first: the first is preempted
    assert result.plan is not None and [(a.kind, a.job_id) for a in result.plan.stops] == [("preempt", first)]
    # a requeue-hold alone is a user hold its owner could lift; the daemon's round leaves an admin hold
    j = _job(env, first)
    assert j["job_state"] == "PENDING" and j["state_reason"] == "JobHeldAdmin", j["state_reason"]
    assert first in json.loads(env.store().get_kv("daemon_admin_holds") or b"[]")


def _fields(env: Env, job: str) -> dict[str, str]:
    """`scontrol show job -o`, key by key (stable from 22.05 to 26.05; tsbatch's Comment has no spaces)."""
    out = subprocess.run(["scontrol", "show", "job", "-o", job], env=env.os_env(), capture_output=True, text=True,
                         timeout=30, check=True).stdout
    return dict(tok.split("=", 1) for tok in out.split() if "=" in tok)


# What job_submit.lua keeps its owner from changing in a managed job, and why each matters (without it,
# Slurm 22.05 accepts each one in at least one of the three states below; docs/daemon.md lists them).
OWNER_REFUSED: dict[str, tuple[str, ...]] = {
    "release": ("scontrol", "release", "{j}"),  # a user hold: the job would start at once, all GPUs visible
    "nice": ("scontrol", "update", "JobId={j}", "Nice=10"),  # held job: priority 0 -> 2, starts (priority/basic)
    "priority": ("scontrol", "update", "JobId={j}", "Priority=100"),
    "no requeue": ("scontrol", "update", "JobId={j}", "Requeue=0"),  # a preemption's requeue-hold does nothing
    "dependency": ("scontrol", "update", "JobId={j}", "Dependency=afterany:1"),  # placed, then never starts
    "node list": ("scontrol", "update", "JobId={j}", "ReqNodeList=node2"),
    "excluded nodes": ("scontrol", "update", "JobId={j}", "ExcNodeList=node1"),  # the daemon does not clear it
    "node count": ("scontrol", "update", "JobId={j}", "NumNodes=1-2"),
    "features": ("scontrol", "update", "JobId={j}", "Features=tsbyfeat"),
    "reservation": ("scontrol", "update", "JobId={j}", "Reservation=tsbyresv"),
    "metadata while running": ("scontrol", "update", "JobId={j}", 'Comment=tesserae:v1:{"g":4}'),
}
# what each state lets through anyway: nice on a job that runs (no start; the daemon reads it as a lower
# priority), the metadata of a held job (read again before any placement, like a resubmission)
OWNER_ALLOWED = {"running": {"nice"}, "admin-held": {"metadata while running"}, "user-held": {"metadata while running"}}
WATCHED = ("JobState", "Reason", "Priority", "Nice", "Requeue", "Dependency", "ReqNodeList", "ExcNodeList", "NumNodes",
           "Features", "Reservation", "Comment", "Partition", "AdminComment")


def test_its_owner_cannot_release_reprioritize_or_move_a_managed_job(env: Env, user: User) -> None:
    """Every update in OWNER_REFUSED, by the job's owner, on an admin-held, a user-held and a running job."""
    root = {"env": env.os_env(), "capture_output": True, "check": True, "timeout": 30}
    subprocess.run(["scontrol", "update", "NodeName=node2", "AvailableFeatures=tsbyfeat", "ActiveFeatures=tsbyfeat"],
                   **root)
    subprocess.run(["scontrol", "create", "ReservationName=tsbyresv", f"Users={user.name}", "Nodes=node2",
                    "StartTime=now+3600", "Duration=10"], **root)
    subprocess.run(["scontrol", "create", "PartitionName=other", "Nodes=node2", "State=UP"], **root)
    try:
        admin_held, user_held, running = (user.submit_managed(1) for _ in range(3))
        subprocess.run(["scontrol", "hold", admin_held], **root)
        subprocess.run(["scontrol", "update", f"JobId={running}", "NodeList=node1", "StartTime=now",
                        "AdminComment=tsby-assignment"], **root)
        subprocess.run(["scontrol", "release", running], **root)
        wait_for(lambda: _fields(env, running)["JobState"] == "RUNNING", 30, "the operator-released job to run")
        through: list[str] = []
        for state, job in (("admin-held", admin_held), ("user-held", user_held), ("running", running)):
            for what, argv in OWNER_REFUSED.items():
                if what in OWNER_ALLOWED[state]:
                    continue
                before = _fields(env, job)
                proc = user.run(*(a.replace("{j}", job) for a in argv))
                after = _fields(env, job)
                changed = {k: (before.get(k), after.get(k)) for k in WATCHED if before.get(k) != after.get(k)}
                if proc.returncode == 0 or changed:
                    through.append(f"{state} {what}: rc {proc.returncode}, changed {changed}")
        assert not through, "\n".join(through)
        for state, job in (("admin-held", admin_held), ("user-held", user_held)):
            assert _fields(env, job)["Priority"] == "0", state  # Slurm will not start it
        assert "start" not in "".join((user.home / f"{j}.out").read_text() for j in (admin_held, user_held)
                                      if (user.home / f"{j}.out").exists())

        # what stays open: a lower time limit; nice on the running job; the metadata of a held one
        for job, update in ((user_held, "TimeLimit=30"), (running, "Nice=5"),
                            (user_held, 'Comment=tesserae:v1:{"g":1,"np":true}')):
            proc = user.run("scontrol", "update", f"JobId={job}", update)
            assert proc.returncode == 0, (update, proc.stderr)
        assert _fields(env, running)["Nice"] == "5" and _fields(env, user_held)["Priority"] == "0"

        # into the partition only while held: an unheld tagged job would be Slurm's to start there
        tagged = user.tsbatch_args(1)
        outside = user.run(*[a for a in tagged if a != "--hold" and not a.startswith("--partition")][:-1],
                           "-p", "other", "--begin=now+3600", user.script)
        assert outside.returncode == 0, outside.stderr
        job = outside.stdout.strip()
        moved = user.run("scontrol", "update", f"JobId={job}", "Partition=tesserae")
        assert moved.returncode != 0 and _fields(env, job)["Partition"] == "other", moved
    finally:
        subprocess.run(["scancel", "-u", user.name], env=env.os_env(), capture_output=True, timeout=30, check=False)
        subprocess.run(["scontrol", "delete", "ReservationName=tsbyresv"], env=env.os_env(), capture_output=True,
                       check=False)
        subprocess.run(["scontrol", "update", "NodeName=node2", "AvailableFeatures=", "ActiveFeatures="],
                       env=env.os_env(), capture_output=True, check=False)
        wait_for(lambda: not _user_jobs(env, user.name, active=True), 60, f"the jobs of {user.name} to end",
                 explain=lambda: f"still active: {_user_jobs(env, user.name, active=True)}")
        subprocess.run(["scontrol", "delete", "PartitionName=other"], env=env.os_env(), capture_output=True,
                       check=False)


def test_a_job_its_owner_requeues_is_held_not_restarted_by_slurm(env: Env, user: User) -> None:
    """`scontrol requeue` (job_submit.lua cannot see it) leaves the job queued and unheld: Slurm would start it
    again by itself after its BeginTime. The daemon's next check holds it instead."""
    d = env.daemon()
    job = user.submit_managed(1)
    d.guard_check()  # secured (admin hold), then placed and released by the round
    assert d.run_round().status == "applied"
    wait_for(lambda: _fields(env, job)["JobState"] == "RUNNING", 30, "the daemon's start")
    d.guard_check()  # seen running on its assignment
    row = env.store().job(job)
    assert row is not None and row.state == "RUNNING", row
    requeued = user.run("scontrol", "requeue", job)
    assert requeued.returncode == 0, requeued.stderr  # its owner may (Slurm's own rule)
    wait_for(lambda: _fields(env, job)["JobState"] == "PENDING", 30, "the requeue")
    d.guard_check()
    j = _fields(env, job)
    assert j["Reason"] == "JobHeldAdmin" and j["Priority"] == "0", (j["Reason"], j["Priority"])
    events = " ".join(e.message for e in env.store().events(limit=100))
    assert "requeued outside tesserae" in events
    assert user.run("scontrol", "release", job).returncode != 0
