"""The Slurm backend (the CLI's, or pyslurm's in the pyslurm lane) against the real local Slurm (session `devcluster` fixture, 4 nodes x 4 GPUs).

Every job is submitted held and placed explicitly, as the daemon does; each test cancels its
own jobs. Waiting uses generous deadlines only to bound a hang, never to assert speed.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from pathlib import Path

import pytest
from backend_under_test import slurm_backend
from waiting import wait_for

from tesserae_slurm.slurm import (
    SlurmCliBackend,
    SlurmCommandError,
    SlurmError,
    SlurmJob,
    SlurmJobState,
    SlurmRunner,
    make_backend,
)

# every_release: also run in the 24.11 and 26.05 lanes (./dev test), as the outcome depends on the release
pytestmark = pytest.mark.every_release

PARTITION = "tesserae"

JOB_SCRIPT = """#!/bin/bash
trap 'echo "USR1 restart=${SLURM_RESTART_COUNT:-0}" >> "$MARKER_DIR/usr1.$SLURM_JOB_ID"' USR1
echo "start job=$SLURM_JOB_ID restart=${SLURM_RESTART_COUNT:-0} node=$SLURMD_NODENAME cvd=$CUDA_VISIBLE_DEVICES x=$TESSERAE_X"
printf 'arg1=%s\\n' "$1"
# payload in the background + wait, so the trap runs as soon as a signal arrives
while :; do sleep 300 & wait $!; done
"""


@pytest.fixture
def backend(devcluster):
    """The backend under test: the CLI, or pyslurm in the pyslurm lane (TESSERAE_TEST_SLURM_BACKEND)."""
    return make_backend(slurm_backend(), devcluster.env())


@pytest.fixture
def workdir(tmp_path):
    script = tmp_path / "job.sh"
    script.write_text(JOB_SCRIPT)
    script.chmod(0o755)
    return tmp_path


@pytest.fixture
def submit(backend, workdir):
    """Submit a held job running job.sh; cancel everything submitted when the test ends."""
    submitted: list[int] = []

    def _submit(name: str = "t", gpus: int = 2, args: tuple[str, ...] = (), extra: tuple[str, ...] = (), env=None):
        job_id = backend.submit(
            [workdir / "job.sh", *args],
            [
                "--hold", "--requeue", "--open-mode=append", f"--chdir={workdir}",
                f"--output={workdir}/out.%j", f"--gres=gpu:{gpus}", "--job-name", name, *extra,
            ],
            env={"MARKER_DIR": str(workdir), **(env or {})},
        )  # fmt: skip
        submitted.append(job_id)
        return job_id

    yield _submit
    for job_id in submitted:
        with contextlib.suppress(SlurmError):
            backend.cancel(job_id)


def job(backend, job_id: int) -> SlurmJob:
    by_id = {j.job_id: j for j in backend.list_jobs(PARTITION)}
    return by_id[job_id]


def running(backend, job_id: int):
    j = job(backend, job_id)
    return j if j.state is SlurmJobState.RUNNING else None


def output(workdir: Path, job_id: int) -> str:
    path = workdir / f"out.{job_id}"
    return path.read_text() if path.exists() else ""


def test_nodes_listed_with_fake_gpus(backend):
    nodes = backend.list_nodes(PARTITION)
    assert [n.name for n in nodes] == ["node1", "node2", "node3", "node4"]
    assert all(n.gpus == 4 and n.shards == 8 and n.available for n in nodes)


def test_held_jobs_are_listed_pending(backend, submit):
    a, b = submit("held-a"), submit("held-b", gpus=1)
    jobs = {j.job_id: j for j in backend.list_jobs(PARTITION)}
    assert jobs[a].name == "held-a" and jobs[b].name == "held-b"
    for job_id, gpus in ((a, 2), (b, 1)):
        j = jobs[job_id]
        assert j.state is SlurmJobState.PENDING and j.held and j.reason == "JobHeldUser"
        assert j.gpus_per_node == gpus and j.nodes == () and j.requeue


def test_place_and_release_runs_on_chosen_node_with_gpu_indices(backend, submit, workdir):
    a, b = submit("pack-a"), submit("pack-b")
    backend.place(a, ["node4"], {"Comment": "tesserae:placed"})
    backend.place(b, ["node4"])
    backend.release([a, b])
    ja = wait_for(lambda: running(backend, a), 30, f"job {a} RUNNING", every=0.1)
    jb = wait_for(lambda: running(backend, b), 30, f"job {b} RUNNING", every=0.1)
    assert ja.nodes == ("node4",) and jb.nodes == ("node4",)
    assert ja.comment == "tesserae:placed"
    ia, ib = ja.gpu_indices("node4"), jb.gpu_indices("node4")
    assert len(ia) == 2 and len(ib) == 2 and sorted(ia + ib) == [0, 1, 2, 3]
    # the job itself sees the indices squeue reports
    for j, idx in ((a, ia), (b, ib)):
        text = wait_for(lambda j=j: output(workdir, j), 30, f"output of job {j}", every=0.1)
        assert f"node=node4 cvd={','.join(map(str, idx))} " in text


def test_signal_requeue_hold_replace_and_cancel(backend, submit, workdir):
    jid = submit("preempt-me", gpus=1)
    backend.place(jid, ["node2"])
    backend.release([jid])
    wait_for(lambda: "restart=0" in output(workdir, jid), 30, "job start", every=0.1)

    assert backend.signal([jid], "USR1", batch_only=True) == {}
    marker = workdir / f"usr1.{jid}"
    wait_for(lambda: marker.exists() and marker.read_text(), 30, "USR1 trap marker", every=0.1)
    assert marker.read_text().strip() == "USR1 restart=0"

    backend.requeue_hold([jid])
    held = wait_for(
        lambda: (j := job(backend, jid)).state is SlurmJobState.PENDING and j.requeued_held and j, 30,
        "requeue-held state", every=0.1,
    )
    assert held.reason == "job requeued in held state" and held.restart_count == 1 and held.held

    backend.place(jid, ["node1"])  # StartTime=now overrides the ~120 s requeue delay
    backend.release([jid])
    again = wait_for(lambda: running(backend, jid), 30, "restart RUNNING", every=0.1)
    assert again.nodes == ("node1",) and again.restart_count == 1
    wait_for(lambda: "restart=1" in output(workdir, jid), 30, "second start in appended output", every=0.1)
    assert "restart=0" in output(workdir, jid)  # --open-mode=append kept the first run

    backend.cancel(jid)
    done = wait_for(lambda: (j := job(backend, jid)).state.is_finished and j, 30, "CANCELLED", every=0.1)
    assert done.state is SlurmJobState.CANCELLED


def test_update_comment_on_held_job(backend, submit):
    jid = submit("comments")
    backend.update_comment(jid, comment="tesserae round=7", admin_comment='{"plan": [1, 2]}')
    j = job(backend, jid)
    assert (j.comment, j.admin_comment) == ("tesserae round=7", '{"plan": [1, 2]}')
    backend.update_comment(jid, admin_comment="only-admin")
    j = job(backend, jid)
    assert (j.comment, j.admin_comment) == ("tesserae round=7", "only-admin")


def test_shell_metacharacters_arrive_verbatim_and_run_nothing(backend, submit, workdir):
    nasty = f"x$(touch {workdir}/pwned1); `touch {workdir}/pwned2` 'sq' \"dq\" & | > end"
    jid = submit(nasty, gpus=1, args=(nasty,), extra=("--comment", nasty))
    backend.update_comment(jid, admin_comment=nasty)
    j = job(backend, jid)
    assert (j.name, j.comment, j.admin_comment) == (nasty, nasty, nasty)
    backend.place(jid, ["node3"], {"Comment": nasty})
    backend.release([jid])
    text = wait_for(lambda: "arg1=" in output(workdir, jid) and output(workdir, jid), 30, "job output", every=0.1)
    assert f"arg1={nasty}\n" in text
    assert not (workdir / "pwned1").exists() and not (workdir / "pwned2").exists()


def test_submit_script_text_on_stdin_with_env(backend, workdir):
    text = "#!/bin/bash\necho \"x=$TESSERAE_X\"\n"
    jid = backend.submit(
        text,
        ["--hold", f"--output={workdir}/out.%j", f"--chdir={workdir}", "--job-name", "stdin-script"],
        env={"TESSERAE_X": "42"},
    )
    try:
        assert job(backend, jid).name == "stdin-script"
        backend.place(jid, ["node1"])
        backend.release([jid])
        assert wait_for(lambda: output(workdir, jid), 30, "stdin job output", every=0.1) == "x=42\n"
        done = wait_for(lambda: (j := job(backend, jid)).state.is_finished and j, 30, "stdin job done", every=0.1)
        assert done.state is SlurmJobState.COMPLETED and done.exit_code == 0
    finally:
        backend.cancel(jid)


@pytest.mark.parametrize(
    "action",
    [
        lambda b: b.release([999999]),
        lambda b: b.place(999999, ["node1"]),
        lambda b: b.requeue_hold([999999]),
        lambda b: b.update_comment(999999, comment="x"),
    ],
    ids=["release", "place", "requeue-hold", "comment"],
)
def test_unknown_job_id_fails_once_with_one_line(backend, action):
    with pytest.raises(SlurmCommandError) as info:
        action(backend)
    assert "Invalid job id" in str(info.value) and "\n" not in str(info.value)


def test_a_signal_to_an_unknown_job_comes_back_as_refused_with_slurms_words(backend):
    refused = backend.signal([999999], "USR1")
    assert list(refused) == [999999] and "Invalid job id" in refused[999999] and "\n" not in refused[999999]


def test_unknown_node_is_refused(backend, submit):
    jid = submit("bad-node")
    with pytest.raises(SlurmCommandError, match="Invalid node name"):
        backend.place(jid, ["node99"])


class CountingRunner(SlurmRunner):
    """The real runner, counting which commands ran (to see the version asked only once)."""

    def __init__(self, env) -> None:
        super().__init__(env)
        self.argvs: list[list[str]] = []

    def run(self, argv, **kwargs):  # type: ignore[override]
        self.argvs.append(list(argv))
        return super().run(argv, **kwargs)


def test_version_asked_once_and_picks_the_node_command(backend):
    runner = CountingRunner(backend.runner.env)
    fresh = SlurmCliBackend(runner=runner)
    for _ in range(3):
        fresh.list_jobs(PARTITION)
        nodes = fresh.list_nodes(PARTITION)
    assert [a for a in runner.argvs if a[-1] == "--version"] == [["sinfo", "--version"]]
    version = fresh.slurm_version()
    expected = ["scontrol", "show", "node", "--json"] if version >= (23, 2) else ["sinfo", "--json"]
    assert runner.argvs[-1] == expected and len(nodes) == 4
    assert ["squeue", "--json", "--states=all"] in runner.argvs


@pytest.mark.skipif(slurm_backend() != "pyslurm",
                    reason="pyslurm's listing against the CLI's: the pyslurm lane (docs/slurm-versions.md)")
def test_pyslurm_lists_jobs_as_the_cli_does(backend, submit, devcluster):
    """Held, running, requeue-held then held by an administrator (the reason code pyslurm hides under the
    description), cancelled: every field the same as squeue --json gives, but the state flags."""
    cli = SlurmCliBackend(devcluster.env())
    held, run, requeued, cancelled = (submit(n, gpus=1) for n in ("held", "run", "requeued", "cancelled"))
    for jid in (run, requeued, cancelled):
        backend.place(jid, ["node3"])
    backend.release([run, requeued, cancelled])
    for jid in (run, requeued, cancelled):
        wait_for(lambda jid=jid: running(backend, jid), 30, f"job {jid} RUNNING", every=0.1)
    backend.requeue_hold([requeued])
    wait_for(lambda: job(backend, requeued).requeued_held, 30, "requeue-held", every=0.1)
    backend.admin_hold([requeued])
    backend.cancel(cancelled)
    wait_for(lambda: job(cli, cancelled).state is SlurmJobState.CANCELLED, 30, "cancelled", every=0.1)

    ours = {j.job_id: j for j in backend.list_jobs(PARTITION)}
    theirs = {j.job_id: j for j in cli.list_jobs(PARTITION)}
    for jid in (held, run, requeued, cancelled):
        assert replace(ours[jid], state_flags=()) == replace(theirs[jid], state_flags=()), jid
    assert ours[requeued].admin_held and ours[requeued].reason == "job requeued in held state"
    assert ours[run].gpu_indices("node3") and ours[cancelled].exit_signal == theirs[cancelled].exit_signal
