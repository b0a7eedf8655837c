"""Two users' pairs scored with time-sliced speeds, and no pair below one: packing against a
brute-force oracle that tries every matching of small instances."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tesserae_slurm.engine import EngineConfig, RoundRequest, decide
from tesserae_slurm.model import Cluster, Job
from tesserae_slurm.placement.pack import pack
from tesserae_slurm.profiles import profile_from_json


def _side(model, batch, gpus=1):
    return {"model": model, "batch_size": batch, "num_gpus": gpus}


R, V, D, P = _side("resnet50", "64"), _side("vgg19", "32"), _side("DCGAN", "32"), _side("PointNet", "64")
G2, R2 = _side("GPT2-Medium", "512/8", 2), _side("resnet50", "64", 2)
PROFILE = profile_from_json({"name": "cross-user", "isolated": [
    {**G2, "strategy": "DP24", "speed": 1.0}, {**G2, "strategy": "10,14", "speed": 0.6}, {**R2, "speed": 1.0},
], "pairs": [
    {"a": R, "b": R, "a_speed": 0.61, "b_speed": 0.61},
    {"a": R, "b": V, "a_speed": 0.7, "b_speed": 0.45},
    {"a": R, "b": D, "a_speed": 0.8, "b_speed": 0.5},
    {"a": D, "b": P, "a_speed": 0.9, "b_speed": 0.7},
    {"a": D, "b": P, "a_speed": 0.55, "b_speed": 0.6, "sharing": "timeslice"},  # measured: sums 1.15
    {"a": V, "b": P, "a_speed": 0.5, "b_speed": 0.45},  # sums 0.95: a pair below one
    {"a": V, "b": V, "a_speed": 0.0, "b_speed": 0.0},
    {"a": G2, "b": R2, "a_strategy": "DP24", "a_speed": 0.5, "b_speed": 0.62},
    {"a": G2, "b": R2, "a_strategy": "10,14", "a_speed": 0.4, "b_speed": 0.55},  # 0.95: beats 0.6 alone
]})
SHAPES = [("resnet50", "64", 1, ()), ("vgg19", "32", 1, ()), ("DCGAN", "32", 1, ()), ("PointNet", "64", 1, ()),
          ("GPT2-Medium", "512/8", 2, ()), ("GPT2-Medium", "512/8", 2, ("10,14",)), ("resnet50", "64", 2, ())]


def _edge(host, guest, cross_user, below_one, objective):
    """The oracle's edge: looked up pair by pair from the profile's key-level options."""
    sharing = "timeslice" if cross_user == "timeslice" and host.user != guest.user else "mps"
    if host.num_gpus != guest.num_gpus:
        return None
    hk = PROFILE.key(host.model, host.batch_size, host.num_gpus)
    gk = PROFILE.key(guest.model, guest.batch_size, guest.num_gpus)
    best = None
    for o in PROFILE.pair_options(hk, gk, "a100", sharing):
        if not o.feasible:
            continue
        if host.parallelism and o.a_strategy not in host.parallelism:
            continue
        if guest.parallelism and o.b_strategy not in guest.parallelism:
            continue
        if best is None or o.total > best.total:
            best = o
    if best is None:
        return None
    alone = max(s for st_, s in ((r.strategy, r.speed) for r in PROFILE.isolated if r.key == hk)
                if not host.parallelism or st_ in host.parallelism)
    if best.total - alone <= 1e-6 or (not below_one and best.total < 1.0 - 1e-9):
        return None
    return best, (best.total - alone if objective == "throughput" else best.total)


def brute_force(hosts, guests, cross_user, below_one, objective):
    """The best value over every matching of guests to hosts (each at most once)."""
    best = 0.0
    for k in range(min(len(hosts), len(guests)) + 1):
        for hs in itertools.combinations(range(len(hosts)), k):
            for gs in itertools.permutations(range(len(guests)), k):
                total = 0.0
                for h, g in zip(hs, gs):
                    e = _edge(hosts[h], guests[g], cross_user, below_one, objective)
                    if e is None:
                        break
                    total += e[1]
                else:
                    best = max(best, total)
    return best


jobs = st.lists(st.tuples(st.sampled_from(SHAPES), st.sampled_from(["ann", "bob", "cy"])), min_size=1, max_size=5)


@settings(max_examples=150, deadline=None)
@given(jobs, jobs, st.sampled_from(["timeslice", "mps"]), st.booleans(), st.sampled_from(["throughput", "paper-sum"]))
def test_packing_matches_the_brute_force_optimum(placed_spec, pending_spec, cross_user, below_one, objective):
    hosts = [Job(f"h{i}", n, m, b, user=u, parallelism=par) for i, ((m, b, n, par), u) in enumerate(placed_spec)]
    guests = [Job(f"g{i}", n, m, b, user=u, parallelism=par) for i, ((m, b, n, par), u) in enumerate(pending_spec)]
    gpu_type_of = {j.id: "a100" for j in hosts}
    res = pack(hosts, guests, PROFILE, gpu_type_of, cross_user=cross_user, below_one=below_one, objective=objective)
    by_id = {j.id: j for j in hosts + guests}
    value = 0.0
    for p in res.pairs:
        edge = _edge(by_id[p.placed], by_id[p.partner], cross_user, below_one, objective)
        assert edge is not None, f"pair {p} is not an edge"
        opt, v = edge
        # the speeds recorded are those of the way the pair shares its GPUs
        assert (p.placed_speed, p.partner_speed) == pytest.approx((opt.a_speed, opt.b_speed))
        value += v
    assert value == pytest.approx(brute_force(hosts, guests, cross_user, below_one, objective), abs=1e-9)


def test_two_users_measured_time_sliced_pair_packs_and_the_fallback_does_not():
    """DCGAN + PointNet were measured time-sliced (1.15): two users' pair forms with those speeds;
    resnet50 + DCGAN were not (fallback 0.45 + 0.45): only one user's pair forms."""
    host = [Job("d", 1, "DCGAN", "32", user="ann")]
    res = pack(host, [Job("p", 1, "PointNet", "64", user="bob")], PROFILE, {"d": "a100"})
    assert [(p.placed_speed, p.partner_speed) for p in res.pairs] == [(0.55, 0.6)]
    host = [Job("r", 1, "resnet50", "64", user="ann")]
    assert not pack(host, [Job("x", 1, "DCGAN", "32", user="bob")], PROFILE, {"r": "a100"}).pairs
    assert pack(host, [Job("x", 1, "DCGAN", "32", user="ann")], PROFILE, {"r": "a100"}).pairs
    # with cross_user="mps" the two users' pair is scored as one user's
    mps = pack(host, [Job("x", 1, "DCGAN", "32", user="bob")], PROFILE, {"r": "a100"}, cross_user="mps")
    assert [(p.placed_speed, p.partner_speed) for p in mps.pairs] == [(0.8, 0.5)]


def test_pairs_below_one_only_when_asked():
    """GPT2-Medium restricted to 10,14 runs at 0.6 alone; resnet50 beside it makes 0.95: a gain, yet
    below one."""
    host = [Job("g", 2, "GPT2-Medium", "512/8", parallelism=("10,14",))]
    guest = [Job("r", 2, "resnet50", "64")]
    assert not pack(host, guest, PROFILE, {"g": "a100"}).pairs
    assert len(pack(host, guest, PROFILE, {"g": "a100"}, below_one=True).pairs) == 1


def test_the_engine_takes_both_from_its_config():
    cluster = Cluster.from_spec("1x1:a100")
    jobs = (Job("r", 1, "resnet50", "64", user="ann"), Job("x", 1, "DCGAN", "32", user="bob"))
    alone = decide(RoundRequest(cluster, jobs), PROFILE)
    assert not alone.packed and alone.placement.jobs() == {"r"}
    both = decide(RoundRequest(cluster, jobs, config=EngineConfig(cross_user="mps")), PROFILE)
    assert both.placement.jobs() == {"r", "x"}
    with pytest.raises(Exception, match="cross_user must be one of timeslice, mps"):
        EngineConfig(cross_user="never")  # type: ignore[arg-type]
