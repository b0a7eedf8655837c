"""The round loop: hand-computed small runs, determinism, noise, heterogeneity and invariants."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tesserae_slurm.model import Cluster, InputError, JobView
from tesserae_slurm.profiles import load_profile
from tesserae_slurm.presets import CONFIGS, get_config
from tesserae_slurm.sim.invariants import InvariantError, check_progress, check_result
from tesserae_slurm.sim.restart import RestartCost
from tesserae_slurm.sim.runner import simulate
from tesserae_slurm.sim.trace_source import resolve_trace
from tesserae_slurm.sim.traces import Trace, TraceJob, generate_tesserae

A100 = load_profile("a100")
HEURISTICS = [name for name, c in CONFIGS.items()
              if c.policy in ("fifo", "las", "srtf", "tiresias", "ftf", "slurm-backfill")]


def job(jid, duration, submit=0.0, gpus=1, model="resnet50", batch="64"):
    return TraceJob(jid, submit, gpus, duration, model, batch)


def run(jobs, config="fifo", cluster="1x1", **kw):
    kw.setdefault("check_invariants", True)
    named = get_config(config)
    if kw.pop("paper", False):  # every move free: the paper's plan (EngineConfig.moves = None)
        named = dataclasses.replace(named, engine=dataclasses.replace(named.engine, moves=None))
    return simulate(Trace.of("t", jobs), Cluster.from_spec(cluster), named, kw.pop("profile", A100), **kw)


def jct(result):
    return {j.job_id: j.jct for j in result.jobs}


def test_fifo_on_one_gpu_waits_for_the_round_boundary():
    # A runs rounds [0, 360) and [360, 720), finishing at 500; B starts at the next round, 720.
    r = run([job("A", 500), job("B", 200)])
    assert jct(r) == {"A": 500, "B": 920}
    assert r.makespan == 920 and r.preemptions == 0 and r.migrations == 0


def test_las_preemption_pays_the_restart_overhead_on_resume():
    # Wall-time LAS alternates A and B every round; each resume costs 30 s (resnet50 default).
    # A: 360 | B: 360 | A: 30 + 330 | B: 30 + 330 | A: 30 + 30 -> t=1500 | B: 30 + 30 -> t=1860
    r = run([job("A", 720), job("B", 720)], config="las", paper=True)
    assert jct(r) == pytest.approx({"A": 1500, "B": 1860})
    assert r.preemptions == 4
    assert {j.job_id: j.preemptions for j in r.jobs} == {"A": 2, "B": 2}


def test_a_job_that_would_finish_within_its_restart_is_not_preempted():
    # As above until t=1080, when A has 30 s of work left, no more than a restart costs: it is not
    # preempted for B (that would cost A 30 s and save B at most the 30 s it waits); its GPU is then
    # idle until the next round, when B resumes.
    # A: 360 | B: 360 | A: 30 + 330 | A: 30 -> t=1110 | B: 30 + 360 -> t=1830
    r = run([job("A", 720), job("B", 720)], config="las")
    assert jct(r) == pytest.approx({"A": 1110, "B": 1830})
    assert r.preemptions == 2


def test_restart_overhead_is_configurable():
    r = run([job("A", 720), job("B", 720)], config="las", restart=RestartCost.uniform(0))
    assert jct(r) == pytest.approx({"A": 1080, "B": 1440})


def test_packed_pair_on_one_gpu_then_the_survivor_runs_alone():
    # resnet50/64 x resnet50/64 pack at 0.61 each on A100. A (61 s) ends at 100 s; B has done 61 of
    # its 161 s by then and runs the remaining 100 s alone: JCT 200 s.
    r = run([job("A", 61), job("B", 161)], config="tesserae-t")
    assert jct(r) == pytest.approx({"A": 100, "B": 200})
    assert {j.job_id: j.packed_s for j in r.jobs} == pytest.approx({"A": 100, "B": 100})


def test_tiresias_single_packs_only_one_gpu_jobs():
    # DCGAN/64 pairs run at 0.995 each on 2 GPUs: Tesserae-T packs them, Tiresias(Single) does not.
    jobs = [job("A", 300, gpus=2, model="DCGAN"), job("B", 300, gpus=2, model="DCGAN")]
    assert jct(run(jobs, config="tiresias-single", cluster="1x2")) == {"A": 300, "B": 660}
    packed = jct(run(jobs, config="tesserae-t", cluster="1x2"))
    assert packed == pytest.approx({"A": 300 / 0.995, "B": 300 / 0.995})
    one_gpu = [job("A", 300, model="DCGAN"), job("B", 300, model="DCGAN")]
    assert jct(run(one_gpu, config="tiresias-single")) == jct(run(one_gpu, config="tesserae-t"))


def test_heterogeneous_cluster_runs_at_the_type_speed_relative_to_v100():
    gavel = load_profile("gavel")
    t = "ResNet-50 (batch size 64)"
    k = gavel.key(t, "64", 1)
    ratio = gavel.isolated_throughput(k, "k80") / gavel.isolated_throughput(k, "v100")
    r = run([TraceJob("A", 0, 1, 36.0, t, "64")], cluster="1x1:k80", profile=gavel)
    assert r.jobs[0].jct == pytest.approx(36.0 / ratio)
    assert r.settings["reference_gpu"] == "v100"


def test_mixed_cluster_uses_both_types():
    gavel = load_profile("gavel")
    jobs = [TraceJob(f"j{i}", 0, g, 600.0, t, b) for i, (g, t, b) in enumerate(
        [(4, "ResNet-50 (batch size 64)", "64"), (4, "Transformer (batch size 64)", "64"),
         (1, "A3C", ""), (1, "CycleGAN", ""), (2, "LM (batch size 20)", "20")])]
    r = simulate(Trace.of("t", jobs), Cluster.from_spec("1x4:v100,1x4:k80"), get_config("tesserae-t"), gavel,
                 check_invariants=True)
    assert len(r.jobs) == 5 and r.rounds[0].running == 2  # both 4-GPU jobs start at once, one per type
    assert sorted(j.jct for j in r.jobs[:2])[0] == pytest.approx(600.0)  # the one on the V100s


def test_utilization_and_ftf_by_hand():
    r = run([job("A", 180)])
    assert r.gpu_utilization() == pytest.approx(1.0)  # busy 180 s of the 180 s span
    # two jobs on one GPU: contention 2 (then 1); B waits one round
    r = run([job("A", 360), job("B", 360)])
    a, b = r.jobs
    assert a.avg_contention == pytest.approx(2.0) and b.avg_contention == pytest.approx(1.5)
    assert a.ftf == pytest.approx(360 / (360 * 2.0)) and b.ftf == pytest.approx(720 / (360 * 1.5))
    s = r.summary()
    assert s["ftf"]["worst"] == pytest.approx(720 / 540) and s["jobs"] == 2


def test_idle_gap_jumps_to_the_next_arrival():
    r = run([job("A", 100, submit=0), job("B", 100, submit=10_000)])
    assert jct(r) == {"A": 100, "B": 100} and len(r.rounds) == 2


def test_deterministic_for_a_seed_and_noise_changes_decisions_only():
    trace, _ = resolve_trace("gen:tesserae:25:200:1")
    cluster = Cluster.from_spec("2x4")
    cfg = get_config("tesserae-t")
    a = simulate(trace, cluster, cfg, A100, seed=3, noise=0.5)
    b = simulate(trace, cluster, cfg, A100, seed=3, noise=0.5)
    strip = lambda r: [dataclasses.replace(x, scheduling_ms=0, placement_ms=0, packing_ms=0, migration_ms=0)  # noqa: E731
                       for x in r.rounds]
    assert a.jobs == b.jobs and strip(a) == strip(b)
    clean = simulate(trace, cluster, cfg, A100, seed=3, noise=0.0, check_invariants=True)
    assert clean.jobs != a.jobs  # noisy decisions differ ...
    simulate(trace, cluster, cfg, A100, seed=4, noise=1.0, check_invariants=True)  # ... and stay valid


def test_bad_input():
    with pytest.raises(InputError, match="needs 8 GPUs"):
        run([job("A", 10, gpus=8)], cluster="1x4")
    with pytest.raises(InputError, match="unknown model"):
        run([job("A", 10, model="AlexNet")])
    with pytest.raises(InputError, match="round length"):
        run([job("A", 10)], round_s=0)
    with pytest.raises(InputError, match="noise"):
        run([job("A", 10)], noise=1.5)


@pytest.mark.parametrize("config", HEURISTICS)
def test_every_heuristic_configuration_keeps_the_invariants_on_the_demo_trace(config):
    trace, name = resolve_trace("demo")
    r = simulate(trace, Cluster.from_spec("3x4"), get_config(config), A100, check_invariants=True, trace_name=name)
    assert len(r.jobs) == 60 and r.policy == config
    assert all(j.jct >= j.duration for j in r.jobs)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10_000), st.sampled_from(["tiresias", "tesserae-t", "tesserae-t-nomig", "themis", "fifo",
                                                "slurm-backfill"]),
       st.sampled_from(["1x4", "2x4", "1x2,1x4", "3x2"]), st.sampled_from([60.0, 360.0]))
def test_invariants_hold_on_random_small_traces(seed, config, cluster, round_s):
    trace, _ = resolve_trace(f"gen:tesserae:12:120:{seed}")
    trace = Trace("t", tuple(t for t in trace if t.num_gpus <= 4))
    r = simulate(trace, Cluster.from_spec(cluster), get_config(config), A100, round_s=round_s, seed=seed,
                 noise=0.2, check_invariants=True)
    assert len(r.jobs) == len(trace)


def test_slurm_backfill_holds_a_long_job_for_the_reserved_one_where_fifo_lets_it_jump():
    # 4 GPUs, rounds of 360 s. R (2 GPUs, limit 1000 s) starts at 0. At 360 A (4 GPUs) and B (2 GPUs,
    # limit 5000 s) wait: A is reserved at 1000 (R's limit); B would run past it on GPUs A needs, so it
    # waits. R ends at 1000, A starts at the round at 1080 and ends at 1180, B starts at 1440.
    # fifo starts B at 360 (no reservation) and A only once B ends (5360 s, round 5400).
    def limited(jid, duration, submit, gpus, limit):
        return dataclasses.replace(job(jid, duration, submit, gpus), time_limit=limit)

    jobs = [limited("R", 1000, 0, 2, 1000), limited("A", 100, 1, 4, 100), limited("B", 5000, 2, 2, 5000)]
    start = {j.job_id: j.start_time for j in run(jobs, "slurm-backfill", "1x4").jobs}
    assert start == {"R": 0, "A": 1080, "B": 1440}
    start = {j.job_id: j.start_time for j in run(jobs, "fifo", "1x4").jobs}
    assert start == {"R": 0, "A": 5400, "B": 360}


def test_keeps_running_check_catches_a_preemption_and_a_move():
    from tesserae_slurm.engine import RoundRequest, decide
    from tesserae_slurm.model import Job, Placement
    from tesserae_slurm.sim.invariants import check_kept

    cluster = Cluster.from_spec("2x1")
    a, b = Job("a", 1, "resnet50", "64"), Job("b", 1, "resnet50", "64")
    first = decide(RoundRequest(cluster, (a,), Placement.empty(cluster)), A100)
    check_kept(first, Placement.empty(cluster), ())
    with pytest.raises(InvariantError, match="held jobs started"):
        check_kept(first, Placement.empty(cluster), ("a",))
    gone = decide(RoundRequest(cluster, (b,), first.placement), A100)  # a is dropped: preempted
    with pytest.raises(InvariantError, match="preempted"):
        check_kept(gone, first.placement, ())
    node = next(iter(first.placement.job_gpus()["a"]))[0]
    other = next(n.name for n in cluster.nodes if n.name != node)
    moved = dataclasses.replace(first, placement=Placement.from_lists({node: [[]], other: [["a"]]}), migrated=())
    with pytest.raises(InvariantError, match="moved"):
        check_kept(moved, first.placement, ())


def test_invariant_checks_catch_violations():
    with pytest.raises(InvariantError, match="not conserved"):
        check_progress({"A": (100.0, 50.0, 40.0)}, set(), set())
    with pytest.raises(InvariantError, match="finished twice"):
        check_progress({"A": (100.0, 100.0, 0.0)}, {"A"}, {"A"})
    with pytest.raises(InvariantError, match="finished=False"):
        check_progress({"A": (100.0, 100.0, 0.0)}, set(), set())
    good = run([job("A", 100)], check_invariants=False)
    fast = dataclasses.replace(good, jobs=(dataclasses.replace(good.jobs[0], finish_time=50.0),))
    with pytest.raises(InvariantError, match="below its isolated duration"):
        check_result(fast, [job("A", 100)], 1.0)
    with pytest.raises(InvariantError, match="lost"):
        check_result(good, [job("A", 100), job("B", 1)], 1.0)


def test_policy_state_and_views_reach_the_policy(monkeypatch):
    """The runner hands the policy exact views: attained GPU-seconds and running flags."""
    seen: list[tuple[float, tuple[JobView, ...]]] = []
    from tesserae_slurm.policies.fifo import FifoPolicy
    original = FifoPolicy.rank

    def spy(self, inp, state):
        seen.append((inp.now, inp.jobs))
        return original(self, inp, state)

    monkeypatch.setattr(FifoPolicy, "rank", spy)
    run([job("A", 500, gpus=2)], cluster="1x2")
    (t0, v0), (t1, v1) = seen
    assert (t0, v0[0].running, v0[0].attained_service) == (0, False, 0)
    assert (t1, v1[0].running, v1[0].attained_service, v1[0].remaining_work) == (360, True, 720, 140)


@pytest.mark.parametrize("config", ["tesserae-t", "tesserae-t-sticky", "tesserae-t-sticky-fit", "fifo", "gavel"])
def test_reusing_unchanged_decisions_changes_no_result(config):
    """The shortcut for quiet rounds (same jobs, same ranking) gives exactly the full engine's results."""
    trace = generate_tesserae(40, 30, 5)
    cluster = Cluster.from_spec("3x4:a100")
    full = simulate(trace, cluster, get_config(config), A100, reuse_decisions=False)
    fast = simulate(trace, cluster, get_config(config), A100, check_invariants=True)
    assert [(j.job_id, j.finish_time, j.migrations, j.preemptions) for j in fast.jobs] == \
           [(j.job_id, j.finish_time, j.migrations, j.preemptions) for j in full.jobs]
    assert fast.migrations == full.migrations and fast.preemptions == full.preemptions
    assert any(r.reused for r in fast.rounds) and not any(r.reused for r in full.rounds)
