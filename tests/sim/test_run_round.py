"""``run_round`` (array passes over the job columns) against tests/oracles/sim_step.py (one Python
step per job): the same finished jobs, outcomes, counters and views, bit for bit, on
real engine decisions (starts, migrations, restarts, packed pairs, LLM strategies, mixed GPU types)
and random job states, some finishing inside the round."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tesserae_slurm.engine import RoundRequest, decide
from tesserae_slurm.model import Cluster
from tesserae_slurm.profiles import load_profile
from tesserae_slurm.sim.jobstate import JobColumns
from tesserae_slurm.sim.restart import RestartCost
from tesserae_slurm.sim.rounds import LiveJob, view_of, job_of, run_round
from tesserae_slurm.profiles.speeds import SpeedModel
from tesserae_slurm.sim.trace_source import resolve_trace

from oracles.sim_step import account, advance

SETUPS = {
    "a100": (Cluster.from_spec("3x4:a100"), "a100", "gen:tesserae:40:80:3"),
    "mixed": (Cluster.from_spec("2x4:v100,2x4:k80"), "gavel", "gen:gavel:40:80:3"),
}
PROFILES = {name: load_profile(name) for name in ("a100", "gavel")}
FIELDS = ("remaining", "done_work", "attained", "executed", "rounds_run", "packed_s", "rounds_packed", "start",
          "finish", "preemptions", "migrations")


def _state(rng: np.random.Generator, t, round_s: float) -> dict[str, object]:
    """A job's numbers before the round: some about to finish, some never run."""
    ran = int(rng.integers(0, 3)) * int(rng.integers(0, 40))
    remaining = float(rng.choice([rng.uniform(1.0, round_s), rng.uniform(round_s, 10 * t.duration)]))
    return dict(remaining=remaining, done_work=float(rng.uniform(0, 1e5)), attained=float(rng.uniform(0, 1e6)),
                executed=float(rng.uniform(0, 1e5)), rounds_run=ran, rounds_packed=int(rng.integers(0, ran + 1)),
                packed_s=float(rng.uniform(0, 1e4)), start=None if ran == 0 else float(rng.uniform(0, 1e5)),
                preemptions=int(rng.integers(0, 3)), migrations=int(rng.integers(0, 3)))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6), st.sampled_from(sorted(SETUPS)), st.sampled_from([360.0, 60.0, 1000.0]),
       st.sampled_from([0.0, 30.0]))
def test_run_round_equals_the_reference(seed, setup, round_s, restart_s):
    cluster, profile_name, trace_spec = SETUPS[setup]
    profile = PROFILES[profile_name]
    trace, _ = resolve_trace(trace_spec, models=profile_name)
    rng = np.random.default_rng(seed)
    active = [trace[i] for i in sorted(rng.choice(len(trace), size=int(rng.integers(1, 30)), replace=False))]
    jobs = {t.job_id: job_of(t) for t in active}
    order = [jobs[t.job_id] for t in active]
    first = decide(RoundRequest(cluster, tuple(rng.permutation(order).tolist())), profile)
    decision = decide(RoundRequest(cluster, tuple(rng.permutation(order).tolist()), first.placement), profile)
    speeds, restart = SpeedModel(profile, cluster), RestartCost.uniform(restart_s)
    states = {t.job_id: _state(rng, t, round_s) for t in active}
    now = 7200.0

    ref = {t.job_id: LiveJob(t, jobs[t.job_id], **states[t.job_id]) for t in active}
    ref_views = {j: view_of(s, False) for j, s in ref.items()}
    outcomes, infeasible = advance(decision, ref, speeds, restart, round_s)
    finished = account(decision, ref, outcomes, now, round_s, ref_views)

    cols = JobColumns(len(active) + 3)  # slots need not be dense
    fast = {t.job_id: LiveJob(t, jobs[t.job_id], **states[t.job_id], cols=cols, k=k + 2) for k, t in enumerate(active)}
    views = {j: view_of(s, False) for j, s in fast.items()}
    got = run_round(decision, fast, cols, speeds, restart, round_s, now, views)

    assert got.finished == finished and got.infeasible == infeasible
    assert got.outcomes == {j: outcomes[j] for j in finished}
    assert got.progressed == any(o.work > 0 for o in outcomes.values())
    for jid in jobs:
        want = [getattr(ref[jid], f) for f in FIELDS]
        have = [getattr(fast[jid], f) for f in FIELDS]
        assert have == want, jid
        assert list(map(type, have)) == list(map(type, want))
    assert views == ref_views
    for jid, v in views.items():  # the same Python types, field by field (floats stay floats)
        assert list(map(type, v)) == list(map(type, ref_views[jid]))
