"""The shipped Philly-derived traces: all VCs merged, one VC, and a directory given as a path."""

from __future__ import annotations

import pytest

from tesserae_slurm.model import InputError
from tesserae_slurm.sim.traces import load_shipped, shipped_path, trace_from_arg
from tesserae_slurm.sim.traces.shipped import PHILLY_VCS


def test_merged_set_has_every_job_of_every_vc_once():
    merged = load_shipped("philly")
    singles = [load_shipped(f"philly-{vc}") for vc in PHILLY_VCS]
    assert len(merged) == sum(len(t) for t in singles) == 15_264
    assert len({j.job_id for j in merged}) == len(merged)
    assert {j.job_id.split("-")[0] for j in merged} == set(PHILLY_VCS)
    assert list(merged.jobs) == sorted(merged.jobs, key=lambda j: j.submit_time)


def test_directory_path_and_model_mapping():
    by_dir = trace_from_arg(str(shipped_path("philly")), models="gavel")
    assert len(by_dir) == 15_264
    a100 = load_shipped("philly-0e4a51", models="a100")
    assert {j.model for j in a100} <= {"resnet50", "vgg19", "DCGAN", "PointNet", "Bert-Large", "GPT2-Medium"}


def test_unknown_vc():
    with pytest.raises(InputError, match="unknown shipped trace"):
        load_shipped("philly-nope")
