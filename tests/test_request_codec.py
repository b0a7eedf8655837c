"""A round's inputs as JSON and back (request_codec.py): what the daemon records, a replay reads."""

from __future__ import annotations

import json

import pytest

from tesserae_slurm.engine import EngineConfig, RoundRequest, decide
from tesserae_slurm.model import Cluster, InputError, Job, MoveCosts, Placement
from tesserae_slurm.model.gpu_limits import GpuLimits
from tesserae_slurm.placement.node_rules import NodeRule
from tesserae_slurm.profiles import load_profile
from tesserae_slurm.request_codec import request_from_json, request_to_json


def _request() -> RoundRequest:
    cluster = Cluster.from_spec("2x4:a100")
    jobs = (Job("a", 2, "resnet50", "32", user="u", account="ml", time_limit=600.0),
            Job("b", 1, "GPT2-Medium", "512/8", parallelism=("DP24",), no_pack=True, group="g"),
            Job("c", 4, "vgg19", "32"))
    current = Placement.from_lists({"node1": [["a"], ["a"], [], []], "node2": [["c"]] * 4})
    return RoundRequest(cluster, jobs, current, (), EngineConfig(min_speed=0.3, moves=MoveCosts(stop_s=25.0)),
                        {"b": NodeRule(frozenset({"node2"}), True, "kept off node2 by alice")},
                        limits=GpuLimits(users={"u": 8}, default_account=16), held=("c",),
                        remaining={"a": 120.0}, recent={"a": ((("node1", 2), ("node1", 3)),)})


def test_a_request_survives_json_and_decides_the_same():
    req = _request()
    text = json.dumps(request_to_json(req, "a100"))
    back, profile = request_from_json(json.loads(text))
    assert back == req and profile == "a100"
    a100 = load_profile("a100")
    assert decide(back, a100).placement == decide(req, a100).placement
    paper = RoundRequest(req.cluster, req.jobs, None, config=EngineConfig(moves=None))
    assert request_from_json(request_to_json(paper))[0] == paper
    for cfg in (EngineConfig(cross_user="mps"), EngineConfig(pairs_below_one=True), EngineConfig()):
        r = RoundRequest(req.cluster, req.jobs, None, config=cfg)
        assert request_from_json(request_to_json(r))[0].config == cfg


def test_a_request_recorded_before_two_users_pairs_replays_as_decided_then():
    """A recorded config without cross_user and pairs_below_one scored every pair with MPS speeds and
    formed pairs below one."""
    raw = request_to_json(_request())
    del raw["config"]["cross_user"], raw["config"]["pairs_below_one"]
    cfg = request_from_json(raw)[0].config
    assert cfg.cross_user == "mps" and cfg.pairs_below_one


@pytest.mark.parametrize("raw,message", [
    ([], "expected a JSON object"),
    ({"cluster": "1x4", "jobs": [], "bogus": 1}, r"unknown keys \['bogus'\]"),
    ({"cluster": "1x4"}, "missing 'jobs'"),
    ({"cluster": "1x4", "jobs": [], "version": 9}, "version 9"),
    ({"cluster": "1x4", "jobs": [], "config": {"placement": "random"}}, "config.placement must be one of"),
    ({"cluster": "1x4", "jobs": [], "config": {"cross_user": "never"}}, "config.cross_user must be one of"),
    ({"cluster": "1x4", "jobs": [], "config": {"moves": {"horizon_s": 0}}}, "horizon_s must be > 0"),
    ({"cluster": "1x4", "jobs": [], "recent": {"a": [["node1"]]}}, "malformed config, rules, recent"),
])
def test_a_bad_request_is_one_line(raw, message):
    with pytest.raises(InputError, match=message):
        request_from_json(raw)
