"""Packing (Algorithm 3) against brute force over all matchings, worked examples, and modes."""

from __future__ import annotations

import csv
import itertools
from importlib import resources

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tesserae_slurm.model import InputError, Job
from tesserae_slurm.placement.pack import pack
from tesserae_slurm.profiles import (
    IsolatedRecord,
    PairOption,
    PairRecord,
    ProfileKey,
    build_profile,
    load_profile,
    profile_from_json,
)

GAIN_EPS = 1e-6

# ---- random inline profiles and jobs ----------------------------------------------------------------

SMALL = ("s1", "s2")
LLM_STRATEGIES = ("A", "B")
GPUS = ("a100", "v100")
SPEEDS = (0.0, 0.2, 0.35, 0.5, 0.6, 0.75, 0.9, 1.0)


def _endpoints(n: int) -> list[tuple[ProfileKey, str | None]]:
    return [(ProfileKey(m, "32", n), None) for m in SMALL] + [(ProfileKey("L", "8/1", n), s) for s in LLM_STRATEGIES]


@st.composite
def profiles(draw):
    """Two small models and one LLM with two strategies on 1 and 2 GPUs of two types; some pairs missing."""
    iso, pairs = [], []
    for g in GPUS:
        for n in (1, 2):
            for s in LLM_STRATEGIES:
                iso.append(IsolatedRecord(g, ProfileKey("L", "8/1", n), s, draw(st.sampled_from((0.6, 0.8, 1.0)))))
            for m in SMALL:  # small jobs alone: usually the normalization's 1.0, sometimes slower
                iso.append(IsolatedRecord(g, ProfileKey(m, "32", n), None, draw(st.sampled_from((1.0, 1.0, 0.7)))))
            for (a, sa), (b, sb) in itertools.combinations_with_replacement(_endpoints(n), 2):
                if draw(st.integers(0, 4)) == 0:
                    continue  # never measured
                pairs.append(PairRecord(g, a, b, PairOption(sa, sb, draw(st.sampled_from(SPEEDS)),
                                                            draw(st.sampled_from(SPEEDS)))))
    return build_profile("random", iso, pairs)


@st.composite
def job_lists(draw, prefix: str, max_size: int = 4):
    jobs = []
    for i in range(draw(st.integers(0, max_size) | st.just(max_size))):  # full lists half the time
        n = draw(st.sampled_from((1, 2)))
        model = draw(st.sampled_from(SMALL + ("L",)))
        par = draw(st.sampled_from(((), ("A",), ("B",)))) if model == "L" else ()
        jobs.append(Job(f"{prefix}{i}", n, model, "32" if model != "L" else "8/1", parallelism=par,
                        no_pack=draw(st.integers(0, 5)) == 0))
    return jobs


def _candidates(profile, job):
    return job.parallelism or profile.strategies(job.model, job.num_gpus) or (None,)


def edge_weight(profile, p: Job, q: Job, gpu: str, below_one: bool = False):
    """Oracle from the strict key-level API: (best pair sum, placed job alone) or None for no edge
    (also when the sum is below one, unless ``below_one``)."""
    if p.num_gpus != q.num_gpus or p.no_pack or q.no_pack:
        return None
    kp, kq = profile.key(p.model, p.batch_size, p.num_gpus), profile.key(q.model, q.batch_size, q.num_gpus)
    alone = max(profile.isolated_speed(kp, gpu, s) for s in _candidates(profile, p))
    sums = [o.total for o in profile.pair_options(kp, kq, gpu)
            if o.feasible and o.a_strategy in _candidates(profile, p) and o.b_strategy in _candidates(profile, q)]
    if not sums or max(sums) <= alone + GAIN_EPS or (not below_one and max(sums) < 1.0 - 1e-9):
        return None
    return max(sums), alone


def brute_force(profile, placed, pending, gpu_of, objective, exclude, below_one=False):
    """Best objective value over every matching (each job at most once), by exhaustive search."""
    edges = {}
    for p in placed:
        if p.id in exclude:
            continue
        for q in pending:
            w = edge_weight(profile, p, q, gpu_of[p.id], below_one)
            if w is not None:
                edges[p.id, q.id] = w[0] - w[1] if objective == "throughput" else w[0]

    def best(i: int, used: frozenset) -> float:
        if i == len(placed):
            return 0.0
        value = best(i + 1, used)
        for q in pending:
            if q.id not in used and (placed[i].id, q.id) in edges:
                value = max(value, edges[placed[i].id, q.id] + best(i + 1, used | {q.id}))
        return value

    return best(0, frozenset()), edges


@pytest.mark.parametrize("objective", ["throughput", "paper-sum"])
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_matches_brute_force(objective, data):
    profile = data.draw(profiles())
    placed = data.draw(job_lists("p"))
    pending = data.draw(job_lists("q"))
    gpu_of = {j.id: data.draw(st.sampled_from(GPUS)) for j in placed}
    exclude = set(data.draw(st.lists(st.sampled_from([j.id for j in placed]), max_size=1))) if placed else set()
    below_one = data.draw(st.booleans())
    optimum, _ = brute_force(profile, placed, pending, gpu_of, objective, exclude, below_one)

    result = pack(placed, pending, profile, gpu_of, objective=objective, exclude=exclude, below_one=below_one)

    by_id = {j.id: j for j in placed + pending}
    assert len({p.placed for p in result.pairs}) == len(result.pairs)  # each placed job at most once
    assert len({p.partner for p in result.pairs}) == len(result.pairs)  # each pending job at most once
    value = 0.0
    for pair in result.pairs:
        a, b = by_id[pair.placed], by_id[pair.partner]
        assert a in placed and b in pending and a.id not in exclude
        assert a.num_gpus == b.num_gpus and not a.no_pack and not b.no_pack
        assert pair.placed_speed > 0 and pair.partner_speed > 0  # no infeasible pair
        w, alone = edge_weight(profile, a, b, gpu_of[a.id], below_one)  # an edge of the oracle: gain > 0
        assert pair.weight == pytest.approx(w)  # best strategies chosen
        assert pair.weight > alone
        assert pair.placed_strategy in _candidates(profile, a) and pair.partner_strategy in _candidates(profile, b)
        value += pair.weight - alone if objective == "throughput" else pair.weight
    assert value == pytest.approx(optimum, abs=1e-9)
    packed = {p.partner for p in result.pairs}
    assert result.unmatched == tuple(q.id for q in pending if q.id not in packed)


# ---- worked examples ----------------------------------------------------------------------------------

def test_objectives_differ_docstring_example():
    """pack.py's example: A alone 0.78 (restricted LLM), B alone 1.0; C+A = 1.5, C+B = 1.6."""
    profile = profile_from_json({
        "isolated": [{"model": "L", "batch_size": "8/1", "num_gpus": 2, "strategy": "10,14", "speed": 0.78},
                     {"model": "L", "batch_size": "8/1", "num_gpus": 2, "strategy": "DP24", "speed": 1.0}],
        "pairs": [{"a": {"model": "L", "batch_size": "8/1", "num_gpus": 2}, "b": {"model": "c", "batch_size": "32"},
                   "a_strategy": "10,14", "a_speed": 0.7, "b_speed": 0.8},
                  {"a": {"model": "b", "batch_size": "32", "num_gpus": 2}, "b": {"model": "c", "batch_size": "32"},
                   "a_speed": 0.8, "b_speed": 0.8}]})
    a = Job("A", 2, "L", parallelism=("10,14",))
    b, c = Job("B", 2, "b", "32"), Job("C", 2, "c", "32")
    gpu = {"A": "a100", "B": "a100"}
    (paper,) = pack([a, b], [c], profile, gpu, objective="paper-sum").pairs
    (thr,) = pack([a, b], [c], profile, gpu, objective="throughput").pairs
    assert (paper.placed, paper.weight) == ("B", pytest.approx(1.6))  # cluster: 0.78 + 1.6 = 2.38
    assert (thr.placed, thr.weight, thr.placed_strategy) == ("A", pytest.approx(1.5), "10,14")  # 1.5 + 1.0 = 2.5


def _csv_rows():
    text = resources.files("tesserae_slurm.data").joinpath("a100_packing_norm_speed.csv").read_text()
    return list(csv.DictReader(text.splitlines()))


@pytest.mark.parametrize("llm,gpus,batch,llm_placed", [
    ("GPT2-Medium", 2, "64", True),
    ("GPT2-Medium", 2, "64", False),
    ("Bert-Large", 4, "128", True),
    ("Bert-Large", 2, "32", False),
], ids=["gpt2-2gpu-placed", "gpt2-2gpu-pending", "bert-4gpu-placed", "bert-2gpu-pending"])
def test_best_strategy_raises_edge_weight(llm, gpus, batch, llm_placed):
    """Paper Fig. (b): choosing the LLM's strategy raises the edge (1.2 -> 1.5 there) -- from the real table."""
    a100 = load_profile("a100")
    rows = [r for r in _csv_rows() if r["model1"] == llm and r["gpu_num1"] == str(gpus)
            and r["model2"] == "resnet50" and r["batch_size2"] == batch]
    sums = {r["pipeline_strategy"]: float(r["speed1"]) + float(r["speed2"]) for r in rows
            if float(r["speed1"]) > 0 and float(r["speed2"]) > 0}
    best = max(sums, key=sums.get)
    assert sums[best] > sums["DP24"]  # the strategy it runs alone with (1.0) is not the best to pack with
    lj, rj = Job("llm", gpus, llm, "128"), Job("cnn", gpus, "resnet50", batch)
    placed, pending = ([lj], [rj]) if llm_placed else ([rj], [lj])
    (pair,) = pack(placed, pending, a100, {placed[0].id: "a100"}).pairs
    llm_strategy = pair.placed_strategy if llm_placed else pair.partner_strategy
    assert llm_strategy == best
    assert pair.weight == pytest.approx(sums[best])
    assert (pair.partner_strategy if llm_placed else pair.placed_strategy) is None


def test_single_mode_packs_only_one_gpu_jobs():
    a100 = load_profile("a100")
    placed = [Job("p1", 1, "vgg19", "128"), Job("p2", 2, "vgg19", "128"), Job("p4", 4, "GPT2-Medium")]
    pending = [Job("q1", 1, "PointNet", "32"), Job("q2", 2, "PointNet", "32"), Job("q4", 4, "PointNet", "32")]
    gpu = {j.id: "a100" for j in placed}
    on = pack(placed, pending, a100, gpu, mode="on")
    single = pack(placed, pending, a100, gpu, mode="single")
    off = pack(placed, pending, a100, gpu, mode="off")
    assert {(p.placed, p.partner) for p in on.pairs} == {("p1", "q1"), ("p2", "q2"), ("p4", "q4")}
    assert [(p.placed, p.partner) for p in single.pairs] == [("p1", "q1")]
    assert single.unmatched == ("q2", "q4")
    assert off.pairs == () and off.unmatched == ("q1", "q2", "q4")


def test_no_pack_exclude_and_unmeasured_jobs():
    a100 = load_profile("a100")
    placed = [Job("p1", 1, "vgg19", "128", no_pack=True), Job("p2", 1, "vgg19", "128"),
              Job("p3", 1, "vgg19", "128"), Job("p8", 8, "GPT2-Medium")]
    pending = [Job("q1", 1, "PointNet", "32", no_pack=True), Job("q2", 1, "PointNet", "32"),
               Job("q8", 8, "resnet50", "32")]
    gpu = {j.id: "a100" for j in placed}
    r = pack(placed, pending, a100, gpu, exclude={"p2"})
    assert [(p.placed, p.partner) for p in r.pairs] == [("p3", "q2")]
    assert r.unmatched == ("q1", "q8")


def test_groups_are_never_packed_together():
    """Job.group (mps.cross_user: never): a pair never spans two groups; "" groups pack with each other."""
    a100 = load_profile("a100")
    placed = [Job("p1", 1, "vgg19", "128", group="alice"), Job("p2", 1, "vgg19", "128", group="bob")]
    pending = [Job("q1", 1, "PointNet", "32", group="bob"), Job("q2", 1, "PointNet", "32", group="carol")]
    gpu = {j.id: "a100" for j in placed}
    r = pack(placed, pending, a100, gpu)
    assert [(p.placed, p.partner) for p in r.pairs] == [("p2", "q1")]
    assert r.unmatched == ("q2",)
    same = [Job(j.id, j.num_gpus, j.model, j.batch_size) for j in placed]
    assert len(pack(same, [Job(j.id, 1, j.model, j.batch_size) for j in pending], a100, gpu).pairs) == 2


def test_ties_go_to_earlier_jobs():
    """Identical jobs: the first pending ones in priority order get the partners, placed in order."""
    a100 = load_profile("a100")
    placed = [Job(f"p{i}", 1, "vgg19", "32") for i in range(3)]
    pending = [Job(f"q{i}", 1, "DCGAN", "64") for i in range(6)]
    gpu = {j.id: "a100" for j in placed}
    r = pack(placed, pending, a100, gpu)
    assert [p.placed for p in r.pairs] == ["p0", "p1", "p2"]
    assert sorted(p.partner for p in r.pairs) == ["q0", "q1", "q2"]
    assert r.unmatched == ("q3", "q4", "q5")
    assert pack(placed, pending, a100, gpu) == r
    # one pending job, three identical hosts: the first host gets it
    assert [(p.placed, p.partner) for p in pack(placed, pending[:1], a100, gpu).pairs] == [("p0", "q0")]


def test_ties_within_a_class_across_classes():
    """The solver alone packs q1 here (found by search); within a class partners go to the earliest."""
    profile = profile_from_json({"pairs": [
        {"a": {"model": "x", "batch_size": "1", "num_gpus": 1}, "b": {"model": "y", "batch_size": "1"},
         "a_speed": 0.6, "b_speed": 0.6},
        {"a": {"model": "x", "batch_size": "1", "num_gpus": 1}, "b": {"model": "z", "batch_size": "1"},
         "a_speed": 0.8, "b_speed": 0.8}]})
    placed = [Job("p0", 1, "x", "1"), Job("p1", 1, "x", "1")]
    pending = [Job("q0", 1, "y", "1"), Job("q1", 1, "y", "1"), Job("q2", 1, "y", "1"), Job("q3", 1, "z", "1")]
    gpu = {j.id: "a100" for j in placed}
    r = pack(placed, pending, profile, gpu)
    assert sorted(p.partner for p in r.pairs) == ["q0", "q3"]
    assert r.unmatched == ("q1", "q2")
    # more identical hosts than guests: the earliest hosts get them
    r = pack(placed + [Job("p2", 1, "x", "1")], [pending[3], pending[0]], profile, gpu | {"p2": "a100"})
    assert [p.placed for p in r.pairs] == ["p0", "p1"]


def test_best_isolated_strategy():
    """An unrestricted LLM runs alone under its best strategy, DP24 (listed last in the table)."""
    a100 = load_profile("a100")
    assert a100.best_isolated(Job("g", 2, "GPT2-Medium"), "a100") == (1.0, "DP24")
    assert a100.best_isolated(Job("g", 4, "Bert-Large", parallelism=("6,6,6,6", "4,8,8,4")), "a100") == (0.69, "4,8,8,4")


def test_no_gain_no_edge():
    """A pair whose sum does not beat the placed job alone is not packed (two vgg19 128: 0.45 + 0.45)."""
    a100 = load_profile("a100")
    key = ProfileKey("vgg19", "128", 1)
    (opt,) = a100.pair_options(key, key, "a100")
    assert opt.total == pytest.approx(0.9)
    r = pack([Job("p", 1, "vgg19", "128")], [Job("q", 1, "vgg19", "128")], a100, {"p": "a100"})
    assert r.pairs == () and r.unmatched == ("q",)


def test_gavel_profile_packs_on_v100():
    gavel = load_profile("gavel")
    placed = [Job("p", 1, "ResNet-50 (batch size 128)", "128")]
    pending = [Job("q", 1, "ResNet-18", "16")]
    (pair,) = pack(placed, pending, gavel, {"p": "v100"}).pairs
    assert pair.weight == pytest.approx(gavel.best_pair(placed[0], pending[0], "v100").total)


@pytest.mark.parametrize("kwargs,message", [
    ({"mode": "sometimes"}, "packing mode must be one of off, on, single"),
    ({"objective": "speed"}, "packing objective must be one of throughput, paper-sum"),
    ({"pending": [Job("q", 1, "llama", "32")]}, "unknown model 'llama'"),
    ({"gpu_type_of": {}}, "placed job 'p' has no GPU type"),
    ({"gpu_type_of": {"p": "h100"}}, "unknown GPU type 'h100'"),
], ids=["mode", "objective", "model", "gpu-missing", "gpu-unknown"])
def test_errors(kwargs, message):
    args = {"placed": [Job("p", 1, "vgg19", "32")], "pending": [Job("q", 1, "DCGAN", "32")],
            "profile": load_profile("a100"), "gpu_type_of": {"p": "a100"}} | kwargs
    with pytest.raises(InputError, match=message):
        pack(**args)


def test_jobs_outside_the_class_table_pack_as_their_lookups_say():
    """A job listing two strategies is a class the profile's table lacks (added for the call): its
    pair is the best the two strategies allow; a job on an unmeasured GPU count never packs."""
    a100 = load_profile("a100")
    two = Job("two", 2, "GPT2-Medium", parallelism=("10,14", "TP24"))
    assert a100.job_class(two) not in a100.classes.number
    cnn = Job("cnn", 2, "resnet50", "64")
    want = a100.best_pair(two, cnn, "a100")
    assert want is not None and want.a_strategy in ("10,14", "TP24")
    (pair,) = pack([two], [cnn], a100, {"two": "a100"}).pairs
    assert (pair.placed_strategy, pair.weight) == (want.a_strategy, pytest.approx(want.total))
    eight = [Job("p8", 8, "resnet50", "64"), Job("q8", 8, "vgg19", "128")]
    assert a100.best_isolated(eight[0], "a100") == (1.0, None)
    got = pack(eight[:1] + [two], eight[1:] + [cnn], a100, {"p8": "a100", "two": "a100"})
    assert [(p.placed, p.partner) for p in got.pairs] == [("two", "cnn")] and got.unmatched == ("q8",)
