"""Jobs of different GPU counts never share GPUs, whatever the profile claims: packing matches
within one GPU count, so a profile (or a lookup) that reports a fast pair of a 2-GPU and a 4-GPU
job must not make them partners."""

from __future__ import annotations

import pytest

from tesserae_slurm.engine import RoundRequest, decide
from tesserae_slurm.model import Cluster, Job
from tesserae_slurm.placement.pack import pack
from tesserae_slurm.profiles import IsolatedRecord, PairOption, ProfileKey, ThroughputProfile, classes

MODELS = ("m1", "m2")


def _lying_profile(monkeypatch: pytest.MonkeyPatch) -> ThroughputProfile:
    """Every job measured alone at 0.5; every pair, of any GPU counts, claimed at 0.9 + 0.9."""
    iso = tuple(IsolatedRecord("a100", ProfileKey(m, "32", n), None, 0.5) for m in MODELS for n in (1, 2, 4))
    monkeypatch.setattr(classes, "class_best_pair", lambda *_: PairOption(None, None, 0.9, 0.9))
    return ThroughputProfile("lying", iso, ())


@pytest.mark.parametrize("objective", ["throughput", "paper-sum"])
def test_a_claimed_pair_of_different_gpu_counts_is_not_packed(monkeypatch, objective):
    profile = _lying_profile(monkeypatch)
    placed = [Job("p2", 2, "m1", "32"), Job("p4", 4, "m2", "32")]
    pending = [Job("q4", 4, "m1", "32"), Job("q1", 1, "m2", "32"), Job("q2", 2, "m2", "32")]
    got = pack(placed, pending, profile, {j.id: "a100" for j in placed}, objective=objective)
    by_id = {j.id: j for j in placed + pending}
    assert got.pairs, "the lie does pack jobs of equal GPU counts"
    assert all(by_id[p.placed].num_gpus == by_id[p.partner].num_gpus for p in got.pairs)
    assert {(p.placed, p.partner) for p in got.pairs} == {("p2", "q2"), ("p4", "q4")}


def test_the_engine_leaves_a_mismatched_pending_job_waiting(monkeypatch):
    """One 4-GPU node: a 2-GPU job runs, a 4-GPU job that the profile claims packs with it waits."""
    profile = _lying_profile(monkeypatch)
    jobs = (Job("a", 2, "m1", "32"), Job("b", 4, "m2", "32"))
    d = decide(RoundRequest(Cluster.from_spec("1x4:a100"), jobs), profile)
    assert d.packed == ()
    assert d.placement.jobs() == {"a"}
