"""Fast-forward over quiet rounds against the round-by-round simulator (the oracle): identical results.

Every per-job record and every round record must be equal, bit for bit, except the measured
timings (a skipped round ranks nothing, so it took 0 ms); only the count of skipped rounds in the
settings differs. Plus worked examples that the skipping happens, and that a policy hook that
over-promises is caught under ``check_invariants``.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tesserae_slurm.model import Cluster
from tesserae_slurm.policies.fifo import FifoPolicy
from tesserae_slurm.policies.las import LasPolicy
from tesserae_slurm.profiles import load_profile
from tesserae_slurm.presets import SchedulerConfig, get_config
from tesserae_slurm.sim.invariants import InvariantError
from tesserae_slurm.sim.restart import RestartCost
from tesserae_slurm.sim.runner import simulate
from tesserae_slurm.sim.trace_source import resolve_trace
from tesserae_slurm.sim.traces import Trace, TraceJob

A100, GAVEL = load_profile("a100"), load_profile("gavel")
TIMINGS = ("scheduling_ms", "placement_ms", "packing_ms", "migration_ms")
SKIPPED = "fast_forwarded_rounds"


def config(name: str, **options) -> SchedulerConfig:
    c = get_config(name)
    return dataclasses.replace(c, policy_options={**c.policy_options, **options}) if options else c


def comparable(r):
    rounds = [dataclasses.replace(x, **{k: 0.0 for k in TIMINGS}) for x in r.rounds]
    return r.jobs, rounds, {k: v for k, v in r.settings.items() if k != SKIPPED}


def both(trace, cluster, cfg, profile, **kw):
    """(round by round, fast-forwarded); asserts they are identical and returns both."""
    slow = simulate(trace, Cluster.from_spec(cluster), cfg, profile, fast_forward=False, **kw)
    fast = simulate(trace, Cluster.from_spec(cluster), cfg, profile, **kw)
    assert slow.settings[SKIPPED] == 0
    assert comparable(fast) == comparable(slow)
    return slow, fast


SHIPPED = [
    ("demo", "3x4:a100", A100, "a100", "tesserae-t", {}),
    ("demo", "3x4:a100", A100, "a100", "fifo", {}),
    ("sample", "1x4:a100", A100, "a100", "tiresias", {}),
    ("shockwave-120", "8x4:v100", GAVEL, "gavel", "tesserae-t-sticky", {}),
    ("shockwave-120", "8x4:v100", GAVEL, "gavel", "las", {}),
    ("philly-51b7ef", "2x4:v100", GAVEL, "gavel", "tesserae-t", {}),
    ("philly-23dbec", "2x4:v100", GAVEL, "gavel", "tiresias", {}),
    ("gen:tesserae:200", "5x4:a100", A100, "a100", "tesserae-t", {}),
    ("gen:tesserae:200", "5x4:a100", A100, "a100", "tesserae-t-sticky", {"noise": 0.2, "seed": 4}),
    ("gen:tesserae:200", "4x4:a100", A100, "a100", "fifo", {"restart": RestartCost.uniform(200)}),
    ("gen:tesserae:200", "5x4:a100", A100, "a100", "las", {}),
    ("gen:tesserae:200", "5x4:a100", A100, "a100", "tesserae-t-fair", {}),
    ("gen:tesserae:200", "5x4:a100", A100, "a100", "tesserae-t-sticky-fit", {}),
    ("gen:tesserae:40:30:2", "3x4:a100", A100, "a100", "las", {"round_s": 100.7}),
]


@pytest.mark.parametrize("trace,cluster,profile,models,policy,kw", SHIPPED,
                         ids=[f"{t}-{p}" for t, _, _, _, p, _ in SHIPPED])
def test_shipped_traces_are_identical_with_and_without_fast_forward(trace, cluster, profile, models, policy, kw):
    tr, _ = resolve_trace(trace, models=models)
    both(tr, cluster, get_config(policy), profile, **kw)


def test_tiresias_with_promotion_is_identical_and_skips():
    tr, _ = resolve_trace("gen:tesserae:200", models="a100")
    cfg = config("tesserae-t", promote_knob=1.5, queue_limits=[1800.0, 7200.0])
    _, fast = both(tr, "5x4:a100", cfg, A100, restart=RestartCost.uniform(45))
    assert fast.settings[SKIPPED] > 0
    cfg = config("tesserae-t", promote_knob=1.5, queue_limits=[900.0], promote_max_run_s=1500.0)
    _, fast = both(tr, "5x4:a100", cfg, A100)
    assert fast.settings[SKIPPED] > 0
    cfg = config("tiresias", promote_knob=0.5, service="time")
    _, fast = both(tr, "3x4:a100", cfg, A100, round_s=0.1 + 0.2 + 299.7)
    assert fast.settings[SKIPPED] > 0


def job(jid, duration, submit=0.0, gpus=1, model="resnet50", batch="64"):
    return TraceJob(jid, submit, gpus, duration, model, batch)


MODELS = [("resnet50", "64"), ("PointNet", "32"), ("Bert-Large", "256/16"), ("vgg19", "128"), ("DCGAN", "64")]


@st.composite
def traces(draw):
    """Small random traces with round-aligned submits and durations (finishes exactly on round
    boundaries, arrivals exactly at round starts) mixed with arbitrary ones."""
    n = draw(st.integers(1, 10))
    jobs = []
    for i in range(n):
        model, batch = draw(st.sampled_from(MODELS))
        aligned = draw(st.booleans())
        submit = draw(st.integers(0, 12)) * 360.0 if aligned else draw(st.floats(0, 5000))
        duration = draw(st.integers(1, 30)) * 360.0 if aligned else draw(st.floats(1, 12000))
        jobs.append(job(f"j{i}", duration, submit, draw(st.sampled_from([1, 1, 2, 4])), model, batch))
    return Trace.of("random", jobs)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces(), st.sampled_from(["fifo", "tiresias", "tesserae-t", "tesserae-t-sticky", "las", "tiresias-promote",
                                  "tesserae-t-fair", "tesserae-t-sticky-fit"]),
       st.sampled_from(["1x4:a100", "2x4:a100", "1x2:a100,1x4:a100"]), st.sampled_from([360.0, 100.7]),
       st.sampled_from([0.0, 0.3]), st.sampled_from([None, 0.0, 45.0]))  # restarts shorter than a round
def test_random_traces_are_identical_with_and_without_fast_forward(trace, policy, cluster, round_s, noise, restart):
    cfg = config("tiresias", promote_knob=2.0, queue_limits=[900.0]) if policy == "tiresias-promote" \
        else get_config(policy)
    both(trace, cluster, cfg, A100, round_s=round_s, noise=noise, seed=1,
         restart=None if restart is None else RestartCost.uniform(restart))


def count_ranks(monkeypatch, cls):
    calls = []
    original = cls.rank

    def spy(self, inp, state):
        calls.append(inp.now)
        return original(self, inp, state)

    monkeypatch.setattr(cls, "rank", spy)
    return calls


def test_a_lone_job_is_fast_forwarded_to_its_last_round(monkeypatch):
    """One job of 10 rounds on one GPU under FIFO: round 0 starts it (engine), round 1 reuses the
    decision and sees the running set unchanged, rounds 2..8 are skipped, round 9 (it finishes at
    exactly its end) is simulated: 3 rank calls instead of 10, the same 10 round records."""
    calls = count_ranks(monkeypatch, FifoPolicy)
    r = simulate(Trace.of("t", [job("A", 3600.0)]), Cluster.from_spec("1x1:a100"), get_config("fifo"), A100)
    assert calls == [0.0, 360.0, 3240.0]
    assert r.settings[SKIPPED] == 7 and len(r.rounds) == 10
    assert [x.time for x in r.rounds] == [360.0 * i for i in range(10)]
    assert r.jobs[0].finish_time == 3600.0 and r.jobs[0].rounds_run == 10
    calls.clear()
    assert comparable(simulate(Trace.of("t", [job("A", 3600.0)]), Cluster.from_spec("1x1:a100"), get_config("fifo"),
                               A100, fast_forward=False)) == comparable(r)
    assert len(calls) == 10


def test_an_arrival_ends_the_stretch(monkeypatch):
    """B arrives at 2000 s: the round at 2160 s is the first to see it, so it is ranked."""
    calls = count_ranks(monkeypatch, FifoPolicy)
    r = simulate(Trace.of("t", [job("A", 3600.0), job("B", 100.0, submit=2000.0)]), Cluster.from_spec("1x2:a100"),
                 get_config("fifo"), A100)
    assert 2160.0 in calls and 1800.0 not in calls and r.settings[SKIPPED] > 0


def test_policies_without_the_hook_and_check_runs_skip_nothing():
    tr, _ = resolve_trace("demo")
    assert simulate(tr, Cluster.from_spec("3x4"), get_config("themis"), A100).settings[SKIPPED] == 0
    assert simulate(tr, Cluster.from_spec("3x4"), get_config("srtf"), A100).settings[SKIPPED] == 0
    no_reuse = simulate(tr, Cluster.from_spec("3x4"), get_config("fifo"), A100, reuse_decisions=False)
    assert no_reuse.settings[SKIPPED] == 0
    checked = simulate(tr, Cluster.from_spec("3x4"), get_config("fifo"), A100, check_invariants=True)
    assert checked.settings[SKIPPED] == 0
    assert comparable(checked) == comparable(simulate(tr, Cluster.from_spec("3x4"), get_config("fifo"), A100))


def test_a_hook_that_over_promises_is_caught_under_check(monkeypatch):
    """GPU-time LAS: B (2 GPUs, from 1800 s) passes A (1 GPU, 1800 GPU-s ahead) after 6 rounds
    together; the order changes though nothing arrives or finishes. A hook claiming every round is
    quiet is wrong, changes the results when trusted, and ``check_invariants`` says so."""
    trace = Trace.of("t", [job("A", 20000.0), job("B", 20000.0, submit=1800.0, gpus=2)])
    las = config("las", service="gpu-time")
    honest = simulate(trace, Cluster.from_spec("1x4:a100"), las, A100, fast_forward=False)
    monkeypatch.setattr(LasPolicy, "stable_rounds", lambda self, inp, state, ranking, max_rounds: max_rounds)
    trusted = simulate(trace, Cluster.from_spec("1x4:a100"), las, A100)
    assert trusted.settings[SKIPPED] > 0 and comparable(trusted) != comparable(honest)
    with pytest.raises(InvariantError, match="fast-forward"):
        simulate(trace, Cluster.from_spec("1x4:a100"), las, A100, check_invariants=True)
