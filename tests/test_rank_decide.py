"""The one round call: the policy's ranking is checked for every shell, then the engine decides."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from tesserae_slurm.bench.synthetic import synthetic_jobs
from tesserae_slurm.engine import EngineConfig, RoundRequest, decide
from tesserae_slurm.model import Cluster, InputError, JobView, Placement
from tesserae_slurm.policies.base import Ranking, SchedulingInput
from tesserae_slurm.policies.registry import make_policy
from tesserae_slurm.profiles import load_profile
from tesserae_slurm.profiles.speeds import SpeedModel
from tesserae_slurm.rank_decide import rank_and_decide

A100 = load_profile("a100")
CLUSTER = Cluster.from_spec("2x4:a100")


@dataclass
class FixedOrder:
    """A policy that ranks as told, whatever the jobs (to hand the call a bad ranking)."""

    order: tuple[str, ...]
    name: str = "fixed"

    def initial_state(self) -> Any:
        return 0

    def rank(self, inp: SchedulingInput, state: Any) -> tuple[Ranking, Any]:
        return Ranking(self.order), state + 1


def _input(n: int = 6, current: Placement | None = None) -> SchedulingInput:
    jobs = synthetic_jobs(n, np.random.default_rng(1))
    views = tuple(JobView(j, submit_time=float(i), attained_service=float(10 * (n - i)), executed_time=0.0,
                          rounds_run=0, running=False) for i, j in enumerate(jobs))
    return SchedulingInput(100.0, 360.0, views, CLUSTER, SpeedModel(A100, CLUSTER).lookup(), 0, current)


def test_same_decision_as_the_engine_called_directly():
    inp = _input()
    policy = make_policy("tiresias")
    r = rank_and_decide(policy, inp, policy.initial_state(), A100, EngineConfig())
    ranking, state = policy.rank(inp, policy.initial_state())
    by_id = {v.id: v.job for v in inp.jobs}
    want = decide(RoundRequest(CLUSTER, tuple(by_id[j] for j in ranking.order)), A100)
    assert r.ranking == ranking and r.policy_state == state and not r.reused
    assert r.decision == want and r.request.jobs == tuple(by_id[j] for j in ranking.order)
    again = rank_and_decide(policy, _input(current=r.decision.placement), r.policy_state, A100, EngineConfig())
    assert again.request.current == r.decision.placement and not again.decision.started  # nothing new to start


@pytest.mark.parametrize(("order", "message"), [
    (("j0", "j1", "j2", "j3", "j4"), r"ranked 5 of 6 active jobs; left out: j5$"),
    (("j0", "j1", "j2", "j3", "j4", "j5", "x"), r"ranked job 'x', which is not active"),
    (("j0", "j1", "j2", "j3", "j4", "j4"), r"ranked job 'j4' more than once"),
    ((), r"ranked 0 of 6 active jobs; left out: j0, j1, j2, j3, j4, \.\.\.$"),
])
def test_a_ranking_that_is_not_the_active_jobs_is_refused(order, message):
    inp = _input()
    assert sorted(v.id for v in inp.jobs) == [f"j{i}" for i in range(6)]
    with pytest.raises(InputError, match="^policy fixed " + message):
        rank_and_decide(FixedOrder(order), inp, 0, A100, EngineConfig())


def test_keep_returns_the_shells_decision_without_the_engine():
    inp = _input()
    policy = FixedOrder(tuple(v.id for v in inp.jobs))
    first = rank_and_decide(policy, inp, 0, A100, EngineConfig())
    seen: list[Ranking] = []

    def keep(ranking: Ranking):
        seen.append(ranking)
        return first.decision

    kept = rank_and_decide(policy, inp, first.policy_state, A100, EngineConfig(), keep=keep)
    assert kept.reused and kept.decision is first.decision and seen == [first.ranking]
    assert kept.policy_state == 2
    asked = rank_and_decide(policy, inp, 0, A100, EngineConfig(), keep=lambda _r: None)
    assert not asked.reused and asked.decision == first.decision
    with pytest.raises(InputError):  # the check comes before the shell's shortcut
        rank_and_decide(FixedOrder(("j0",)), inp, 0, A100, EngineConfig(), keep=keep)


def test_clock_times_the_ranking():
    ticks = iter(range(100))
    r = rank_and_decide(make_policy("fifo"), _input(), None, A100, EngineConfig(), clock=lambda: float(next(ticks)))
    assert r.rank_s == 1.0 and r.decision.timings.placement == 1.0
