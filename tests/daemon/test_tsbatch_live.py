"""tsbatch against the real dev cluster: what it submits, verbatim names and arguments, and refusals."""

from __future__ import annotations

import subprocess

import pytest

from tesserae_slurm.model.meta import JobMeta

from .helpers import TICK, TOY, Env, done, parse_gpus_str, submit_tick, wait_for

# every_release: also run in the 24.11 and 26.05 lanes (./dev test), as the outcome depends on the release
pytestmark = pytest.mark.every_release


def _show(env: Env, job: str) -> str:
    return subprocess.run(["scontrol", "show", "job", "-o", job], env=env.os_env(), capture_output=True, text=True,
                          timeout=30, check=True).stdout


def test_submits_held_requeueable_appending_with_signal_and_metadata(env: Env) -> None:
    job = env.tsbatch("--parsable", "--gpus", "2", "--model", "GPT2-Medium", "--parallelism", "10,14;12,12",
                      "-t", "10", str(TOY), str(env.out)).stdout.strip()
    show = _show(env, job)
    for field in ("JobState=PENDING", "Reason=JobHeldUser", "Requeue=1", "Partition=tesserae", "NumNodes=1"):
        assert field in show, (field, show)
    assert "Priority=0" in show  # held
    slurm = env.squeue()[job]
    meta = JobMeta.decode(slurm["comment"])
    assert meta == JobMeta(2, "GPT2-Medium", "", ("10,14", "12,12"))
    plain = env.tsbatch("--gpus", "1", "--model", "resnet50", "--batch-size", "64", str(TOY), str(env.out))
    assert plain.stdout.startswith("Submitted batch job ")
    dry = env.tsbatch("--dry-run", "--gpus", "8", "--no-profile", str(TOY), str(env.out)).stdout
    for part in ("--hold", "--requeue", "--open-mode=append", "--signal=B:USR1@20", "--partition=tesserae",
                 "--nodes=2"):
        assert part in dry, dry


def test_shell_metacharacters_arrive_verbatim_and_run_nothing(env: Env) -> None:
    mark = env.tmp / "pwned"
    name = f"x; touch {mark} && echo $(touch {mark}) `touch {mark}` | cat > {mark}"
    args = [f"$(touch {mark})", f"`touch {mark}`", f"a; touch {mark}", "b|c", f"> {mark}", "it's \"quoted\"", "*"]
    job = env.tsbatch("--parsable", "--gpus", "1", "--no-profile", "-J", name, "-o", str(env.out / "%j.out"),
                      str(TICK), str(env.out), "3", "0.01", *args).stdout.strip()
    assert env.squeue()[job]["name"] == name
    d = env.daemon()
    wait_for(lambda: done(env, job), 60, "the job to run", tick=d.run_round, every=1)
    start = next(e for e in env.events(job) if e["event"] == "start")
    assert start["argv"][-len(args):] == args
    assert not mark.exists()
    same = submit_tick(env, 1, 3, "$(id)", name="$(id)")  # the in-process path is just as literal
    assert env.squeue()[same]["name"] == "$(id)"


BAD = [
    (["--gpus", "3", "--model", "DCGAN", "--batch-size", "32"], "power of two"),
    (["--gpus", "16", "--no-profile"], "at most 8 GPUs"),
    (["--gpus", "two", "--no-profile"], "whole number"),
    (["--gpus", "1", "--model", "NoSuchNet"], "unknown model 'NoSuchNet'"),
    (["--gpus", "1"], "--model is required"),
    (["--gpus", "1", "--model", "DCGAN", "--batch-size", "7"], "unknown batch size"),
    (["--gpus", "1", "--model", "Bert-Large", "--batch-size", "999"], "a global batch of 256 in micro-batches of 16"),
    (["--gpus", "2", "--model", "GPT2-Medium", "--parallelism", "3,3,3"], "does not divide 2 GPUs"),
    (["--gpus", "2", "--model", "DCGAN", "--batch-size", "32", "--parallelism", "10,14"], "no parallelism strategies"),
    (["--gpus", "1", "--no-profile", "--model", "DCGAN"], "drop --model"),
    (["--gpus", "1", "--no-profile", "--gres=gpu:2"], "conflicting GPU requests: --gpus 1 asks for 1 GPU(s)"),
    (["-N", "2", "--gpus-per-node=2", "--no-profile"], "-N 2: tesserae runs 4 GPU(s) on 1 node(s)"),
    (["--gres=gpu:h100:1", "--no-profile"], "has no h100 GPUs"),
    (["--gpus", "1", "--no-profile", "-w", "node1"], "--nodelist is not allowed"),
    (["--gpus", "1", "--no-profile", "--no-requeue"], "must stay requeueable"),
    (["--gpus", "1", "--no-profile", "-p", "debug"], "managed partition"),
    (["--gpus", "1", "--no-profile", "--open-mode=truncate"], "append"),
    (["--gpus", "1", "--no-profile", "--comment", "x"], "metadata"),
    (["--gpus", "1", "--no-profile", "--frobnicate"], "unknown option --frobnicate"),
]


@pytest.mark.parametrize("args,message", BAD, ids=[m for _, m in BAD])
def test_bad_input_is_refused_with_one_line_and_nothing_is_submitted(env: Env, args: list[str], message: str) -> None:
    before = env.squeue_ids()
    proc = env.tsbatch(*args, str(TOY), str(env.out), check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tsbatch: error: ") and message in lines[0], proc.stderr
    assert env.squeue_ids() == before


def test_bad_script_header_and_missing_script_are_refused(env: Env) -> None:
    script = env.tmp / "bad.sbatch"
    script.write_text("#!/bin/bash\n#SBATCH --mem-per-gpu=8G\n#SBATCH -J fine\necho hi\n")
    before = env.squeue_ids()
    proc = env.tsbatch("--gpus", "1", "--no-profile", str(script), check=False)
    assert proc.returncode == 2 and "bad.sbatch #SBATCH: sbatch option --mem-per-gpu is not allowed" in proc.stderr
    proc = env.tsbatch("--gpus", "1", "--no-profile", str(env.tmp / "missing.sh"), check=False)
    assert proc.returncode == 2 and "cannot read batch script" in proc.stderr
    proc = env.tsbatch("--gpus", "1", "--no-profile", check=False)
    assert proc.returncode == 2 and "missing batch script" in proc.stderr
    assert env.squeue_ids() == before


def test_gpu_options_in_the_header_are_translated_and_the_job_runs(env: Env) -> None:
    """A Perlmutter-style header (-N 2 --gpus-per-node=4) becomes an 8-GPU job on 2 nodes: Slurm sees no
    GPU request (job_submit.lua would refuse one), keeps the header's other options, and the daemon runs it."""
    first, trap, *rest = TICK.read_text().split("\n")
    script = env.tmp / "perlmutter.sbatch"  # tick.sbatch with a header; tick.py stays next to the original
    script.write_text("\n".join([first, "#SBATCH -N 2 --gpus-per-node=4 -J translated", trap,
                                 f"export TESSERAE_SCRIPT_DIR={TICK.parent}", *rest]))
    job = env.tsbatch("--parsable", "--no-profile", "-o", str(env.out / "%j.out"), str(script), str(env.out), "3",
                      "0.05").stdout.strip()
    assert JobMeta.decode(env.squeue()[job]["comment"]) == JobMeta(8, no_profile=True)
    show = _show(env, job)
    assert "NumNodes=2" in show and "JobName=translated" in show, show
    assert not [f for f in show.split() if f.startswith("TresPer") or "gres/gpu" in f], show  # no GPU request
    d = env.daemon()
    result = d.run_round()
    assert result.status == "applied", result.error
    placed = {p.job_id: parse_gpus_str(p.gpus) for p in env.store().placements(result.round_id)}
    assert {node: len(idx) for node, idx in placed[job].items()} == {"node1": 4, "node2": 4}, placed
    wait_for(lambda: done(env, job), 90, "the translated job to run", tick=d.run_round, every=1)
