"""`tesserae bench moves` without a cluster: the scenario's job set, and the counts read from a state
database (a real one, written through the daemon's journal)."""

from __future__ import annotations

import json

from tesserae_slurm.bench.moves import analyze, dump_rounds, scenario_jobs
from tesserae_slurm.daemon.round.actions import plan_round
from tesserae_slurm.daemon.state.journal import Intent, Journal, RoundCounts
from tesserae_slurm.daemon.state.store import Store
from tesserae_slurm.engine import RoundRequest
from tesserae_slurm.model import Cluster, Job, Placement, RoundDecision
from tesserae_slurm.profiles import load_profile
from tesserae_slurm.request_codec import request_to_json


def test_the_scenario_is_the_issues_job_set_and_the_same_every_time():
    jobs = scenario_jobs(32, 0)
    assert jobs == scenario_jobs(32, 0) != scenario_jobs(32, 1)
    assert len(jobs) == 32 and {j.gpus for j in jobs} <= {1, 2, 4, 8} and 8 in {j.gpus for j in jobs}
    assert {j.model for j in jobs} == {"DCGAN", "resnet50", "vgg19", "PointNet", "Bert-Large", "GPT2-Medium"}
    a100 = load_profile("a100")
    from tesserae_slurm.bench.moves import batch_of
    for j in jobs:  # every job is one the profile knows (8-GPU jobs run alone)
        a100.job_class(Job(j.name, j.gpus, j.model, batch_of(j)))
        assert 20 <= j.duration_s <= 150
    assert [j.arrival_s for j in jobs] == sorted(j.arrival_s for j in jobs)


def test_shifts_oscillations_and_partial_rounds_are_counted_against_the_gpus_held(tmp_path):
    """Round 1 moves a within node1 (a shift); round 2 moves it back (an oscillation, and a shift again);
    round 3's target for job 3 was never reached (its start skipped), so round 4 starting it elsewhere is
    no move."""
    store = Store.open(tmp_path / "state.db")
    j = Journal(store)
    cluster = Cluster.from_spec("2x4:a100")
    jobs = (Job("1", 2, "resnet50", "32"), Job("3", 1, "resnet50", "32"))
    plans = [{"node1": [["1"], ["1"], [], []], "node2": [[]] * 4},
             {"node1": [[], [], ["1"], ["1"]], "node2": [[]] * 4},
             {"node1": [["1"], ["1"], [], []], "node2": [[]] * 4},
             {"node1": [["1"], ["1"], [], []], "node2": [["3"], [], [], []]},
             {"node1": [["1"], ["1"], ["3"], []], "node2": [[]] * 4}]
    for r in range(1, 5):
        current, target = Placement.from_lists(plans[r - 1]), Placement.from_lists(plans[r])
        moved = ("1",) if current.job_gpus()["1"] != target.job_gpus()["1"] else ()
        started = ("3",) if "3" in target.jobs() and "3" not in current.jobs() else ()
        d = RoundDecision(target, started, (), moved, tuple(x for x in ("1",) if x not in moved), (), ())
        rid = j.begin_round(1000.0 + 10 * r, "tesserae-t", False)
        request = request_to_json(RoundRequest(cluster, jobs, current), "a100")
        j.record_decision(rid, d, plan_round(d, {}).targets, RoundCounts(jobs_active=2, migrated=len(moved)),
                          ("1", "3"), {}, request)
        for kind in (["migrate"] if moved else []):
            aid = j.record_intents(rid, [Intent(kind, "1", {})], 1000.0)[0]
            j.finish_action(aid, "done", 1001.0)
        if r == 3:
            j.update_round(rid, status="partial", error="job 3: GPUs still held by job(s) 9", finished_at=1005.0 + 10 * r)
            plans[3] = plans[2]  # it did not start: round 4 sees the GPUs as round 3 left them
        else:
            j.update_round(rid, status="applied", finished_at=1002.0 + 10 * r)
    store.close()
    rep = analyze(tmp_path / "state.db")
    assert (rep.rounds, rep.rounds_partial, rep.migrations_planned, rep.migrations_done) == (4, 1, 2, 2)
    assert (rep.same_node_shifts, rep.oscillations) == (2, 1)
    assert rep.target_changes == 2  # 1 once, and 3 to a target it never reached: no move, counted all the same
    assert rep.round_s_max == 5.0 and rep.partial_errors == ("round 3: job 3: GPUs still held by job(s) 9",)
    out = tmp_path / "rounds.jsonl"
    assert dump_rounds(tmp_path / "state.db", out) == 4
    first = json.loads(out.read_text().splitlines()[0])
    assert first["round"] == 1 and first["request"]["profile"] == "a100" and first["decision"]["migrated"] == ["1"]
