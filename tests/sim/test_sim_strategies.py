"""Decision profile vs truth, and the LLM strategy modes of the parallelism study: worked examples
whose expected speeds are read from the raw A100 CSV with the csv module (not the profile code)."""

from __future__ import annotations

import csv
import dataclasses
from importlib import resources

import pytest

from tesserae_slurm.model import Cluster, InputError
from tesserae_slurm.profiles import PairOption, load_profile
from tesserae_slurm.profiles.table import ThroughputProfile
from tesserae_slurm.presets import get_config
from tesserae_slurm.sim.restart import RestartCost
from tesserae_slurm.sim.runner import simulate
from tesserae_slurm.sim.strategies import LLM_STRATEGIES, data_parallel, even_split, restrict_packed
from tesserae_slurm.sim.trace_source import resolve_trace
from tesserae_slurm.sim.traces import Trace, TraceJob

A100 = load_profile("a100")
LLM_LONG = 5000.0  # the LLM outlives the partner: the partner packs with it for its whole life
PARTNER_S = 1000.0


def raw_rows() -> list[dict[str, str]]:
    text = resources.files("tesserae_slurm.data").joinpath("a100_packing_norm_speed.csv").read_text()
    return list(csv.DictReader(text.splitlines()))


def raw_pair(strategy: str) -> tuple[float, float]:
    """(GPT2-Medium speed, resnet50/32 speed) on 2 GPUs under ``strategy``, from the raw CSV."""
    for r in raw_rows():
        if (r["model1"], r["gpu_num1"], r["pipeline_strategy"], r["model2"], r["batch_size2"]) == (
                "GPT2-Medium", "2", strategy, "resnet50", "32"):
            return float(r["speed1"]), float(r["speed2"])
    raise AssertionError(f"no raw row for {strategy}")


def two_jobs() -> Trace:
    return Trace.of("t", [TraceJob("llm", 0.0, 2, LLM_LONG, "GPT2-Medium", "512/8"),
                          TraceJob("r", 0.0, 2, PARTNER_S, "resnet50", "32")])


def partner_jct(**kw) -> float:
    r = simulate(two_jobs(), Cluster.from_spec("1x2"), get_config("tesserae-t"), kw.pop("profile", A100),
                 restart=RestartCost.uniform(0), check_invariants=True, **kw)
    return next(j.jct for j in r.jobs if j.job_id == "r")


def best_pair() -> str:
    """The strategy with the largest feasible speed sum, from the raw CSV."""
    rows = [r for r in raw_rows() if (r["model1"], r["gpu_num1"], r["model2"], r["batch_size2"]) ==
            ("GPT2-Medium", "2", "resnet50", "32") and float(r["speed1"]) > 0]
    return max(rows, key=lambda r: float(r["speed1"]) + float(r["speed2"]))["pipeline_strategy"]


def test_default_pp_and_dp_are_read_from_the_table():
    assert even_split(A100.strategies("GPT2-Medium", 2), 2) == "12,12"
    assert even_split(A100.strategies("Bert-Large", 4), 4) == "6,6,6,6"
    assert data_parallel(A100.strategies("GPT2-Medium", 4)) == "DP24"
    assert even_split(("10,14", "TP24"), 2) is None


@pytest.mark.parametrize("mode,strategy", [("best", None), ("dp", "DP24"), ("default-pp", "12,12"),
                                           ("default-pp-always", "12,12")])
def test_the_partner_runs_at_the_speed_of_the_strategy_the_mode_allows(mode, strategy):
    # Both jobs arrive together on 2 GPUs: one is placed, the other packed onto it for the partner's
    # whole life, so its JCT is its work over its packed speed under the chosen strategy.
    speed = raw_pair(strategy or best_pair())[1]
    assert partner_jct(llm_strategy=mode) == pytest.approx(PARTNER_S / speed, rel=1e-9)


def test_restrict_packed_keeps_isolated_runs_and_only_the_modes_pair_options():
    for mode, want in (("dp", {2: "DP24", 4: "DP24"}), ("default-pp", {2: "12,12", 4: "6,6,6,6"})):
        p = restrict_packed(A100, mode)
        assert p.isolated == A100.isolated
        llm = [x for x in p.pairs if x.option.a_strategy or x.option.b_strategy]
        assert llm and all((x.option.a_strategy or x.option.b_strategy) == want[x.a.num_gpus] for x in llm)
        plain = [x for x in A100.pairs if not (x.option.a_strategy or x.option.b_strategy)]
        assert [x for x in p.pairs if not (x.option.a_strategy or x.option.b_strategy)] == plain
    assert restrict_packed(A100, "best") is A100
    with pytest.raises(InputError, match="unknown LLM strategy mode"):
        restrict_packed(A100, "pp")
    assert set(LLM_STRATEGIES) == {"best", "dp", "default-pp", "default-pp-always"}


def test_decisions_follow_the_decision_profile_and_progress_the_truth():
    # The scheduler believes 14,10 gives both jobs 0.99; in truth it gives the raw row's speeds.
    def fake(p):
        if {p.a.model, p.b.model} == {"GPT2-Medium", "resnet50"} and p.a.num_gpus == 2 and "14,10" in (
                p.option.a_strategy, p.option.b_strategy):
            return dataclasses.replace(p, option=dataclasses.replace(p.option, a_speed=0.99, b_speed=0.99))
        return p
    believed = ThroughputProfile("believed", A100.isolated, tuple(fake(p) for p in A100.pairs), dict(A100.datasets))
    assert partner_jct(decision_profile=believed) == pytest.approx(PARTNER_S / raw_pair("14,10")[1], rel=1e-9)
    # the oracle as the decision profile changes nothing
    assert partner_jct(decision_profile=A100) == partner_jct()


def test_a_decision_profile_without_pairs_packs_nothing():
    trace, _ = resolve_trace("gen:tesserae:40:80:3", models="a100")
    unpackable = ThroughputProfile("no-pairs", A100.isolated, tuple(
        dataclasses.replace(p, option=PairOption(p.option.a_strategy, p.option.b_strategy, 0.0, 0.0))
        for p in A100.pairs), dict(A100.datasets))
    cluster = Cluster.from_spec("2x4:a100")
    blind = simulate(trace, cluster, get_config("tesserae-t"), A100, decision_profile=unpackable)
    nopack = simulate(trace, cluster, get_config("tiresias"), A100)
    assert all(r.packed_pairs == 0 for r in blind.rounds)
    assert [(j.job_id, j.jct) for j in blind.jobs] == [(j.job_id, j.jct) for j in nopack.jobs]
    assert blind.settings["decision_profile"] == "no-pairs" and blind.settings["profile"] == "a100"


def test_decision_profile_must_know_the_trace():
    other = load_profile("gavel")
    with pytest.raises(InputError):
        simulate(two_jobs(), Cluster.from_spec("1x2:a100"), get_config("tesserae-t"), A100, decision_profile=other)


def test_pairs_that_do_not_fit_in_truth_are_counted():
    from tesserae_slurm.model import PackedPair, Placement
    from tesserae_slurm.model.decision import RoundDecision
    from tesserae_slurm.profiles.speeds import SpeedModel
    from tesserae_slurm.sim.jobstate import JobColumns
    from tesserae_slurm.sim.rounds import LiveJob, job_of, run_round, view_of

    assert raw_pair("16,8") == (0.0, 0.0)  # out of memory in the A100 table
    trace = two_jobs()
    cols = JobColumns(len(trace))
    live = {t.job_id: LiveJob(t, job_of(t), t.duration, cols=cols, k=k) for k, t in enumerate(trace)}
    views = {j: view_of(s, False) for j, s in live.items()}
    dec = RoundDecision(Placement.from_lists({"node1": [["llm", "r"], ["llm", "r"]]}), ("llm", "r"), (), (), (),
                        (PackedPair("llm", "r", 0.9, 0.9, "16,8", None),), (), {"llm": "16,8"})
    speeds = SpeedModel(A100, Cluster.from_spec("1x2:a100"))
    got = run_round(dec, live, cols, speeds, RestartCost.uniform(0), 360.0, 0.0, views)
    assert got.infeasible == 1 and not got.progressed and live["r"].done_work == live["llm"].done_work == 0.0
    dec = dataclasses.replace(dec, packed=(PackedPair("llm", "r", 0.9, 0.9, "14,10", None),),
                              strategies={"llm": "14,10"})
    assert run_round(dec, live, cols, speeds, RestartCost.uniform(0), 360.0, 360.0, views).infeasible == 0
