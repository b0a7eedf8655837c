"""Issue 20 item 7 on the real local Slurm: the daemon checks hand-written metadata with tsbatch's rules.

A user can put any Comment on a job with plain `sbatch --comment` (tsbatch refuses --comment). Such
jobs carry the tag, so the daemon looks at them, and must never place one whose metadata tsbatch
would have refused; `tesserae explain` and the log say why.
"""

from __future__ import annotations

import logging
import subprocess

import pytest

from .helpers import TOY, Env

pytestmark = pytest.mark.slurm_live

BAD = {
    "three-gpus": ('tesserae:v1:{"g":3,"m":"DCGAN","b":"32"}', "power of two"),
    "np-string": ('tesserae:v1:{"g":1,"m":"DCGAN","b":"32","np":"no"}', "np must be true or false"),
    "llm-batch": ('tesserae:v1:{"g":1,"m":"Bert-Large","b":"999"}', "a global batch of 256 in micro-batches of 16"),
}


def _sbatch(env: Env, comment: str) -> str:
    out = subprocess.run(["sbatch", "--parsable", "--hold", "--requeue", "--partition=tesserae", "--comment", comment,
                          "-o", str(env.out / "%j.out"), str(TOY), str(env.out), "50", "0.05"],
                         env=env.os_env(), capture_output=True, text=True, timeout=30, check=True)
    return out.stdout.strip()


def test_hand_written_invalid_metadata_is_never_placed(env: Env, caplog: pytest.LogCaptureFixture) -> None:
    bad = {label: _sbatch(env, comment) for label, (comment, _) in BAD.items()}
    good = env.submit_toy(1, 50)
    d = env.daemon()
    with caplog.at_level(logging.WARNING):
        for _ in range(2):
            d.run_round()
    slurm = env.squeue()
    assert slurm[good]["admin_comment"].startswith("tesserae-assign:")  # the round did place jobs
    for label, job in bad.items():
        why = BAD[label][1]
        assert slurm[job]["state"] == "PENDING" and not slurm[job]["admin_comment"], (label, slurm[job])
        explain = env.tesserae("explain", job)
        assert explain.returncode == 0, explain.stderr
        assert "invalid tesserae metadata" in explain.stdout and why in explain.stdout, (label, explain.stdout)
        assert any(job in r.getMessage() and why in r.getMessage() for r in caplog.records), (label, caplog.text)
