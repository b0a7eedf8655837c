"""A straightforward simulator round, one Python step per job: what ``sim.rounds.run_round`` (array
passes over the job columns) must agree with. Each placed job runs alone or with its packed partner
(``progress.run_alone``/``run_pair``) after its restart overhead if it resumes; then every job's
counters are updated."""

from __future__ import annotations

from tesserae_slurm.model import JobView, RoundDecision
from tesserae_slurm.profiles.speeds import SpeedModel
from tesserae_slurm.sim.jobstate import LiveJob
from tesserae_slurm.sim.progress import Member, Outcome, run_alone, run_pair
from tesserae_slurm.sim.restart import RestartCost
from tesserae_slurm.sim.rounds import view_of


def advance(decision: RoundDecision, live: dict[str, LiveJob], speeds: SpeedModel, restart: RestartCost,
            round_s: float) -> tuple[dict[str, Outcome], int]:
    """Each placed job's progress this round, and how many packed pairs do not fit in truth."""
    node_of, strategies = decision.placement.job_nodes(), decision.strategies
    resumed = set(decision.migrated) | {j for j in decision.started if live[j].rounds_run > 0}

    def member(jid: str, gpu_type: str, speed: float) -> Member:
        s = live[jid]
        overhead = min(round_s, restart.of(s.job.model)) if jid in resumed else 0.0
        return Member(s.remaining, overhead, speeds.solo(s.job, gpu_type, strategies.get(jid)), speed)

    outcomes: dict[str, Outcome] = {}
    infeasible = 0
    for p in decision.packed:
        if p.placed not in node_of or p.partner not in node_of:
            continue  # a pair counts only when both members are placed
        g = speeds.node_type[node_of[p.placed]]
        a, b = live[p.placed].job, live[p.partner].job
        sa, sb = speeds.packed(a, b, g, strategies.get(a.id), strategies.get(b.id))
        infeasible += sa == 0.0 and sb == 0.0
        outcomes[a.id], outcomes[b.id] = run_pair(member(a.id, g, sa), member(b.id, g, sb), round_s)
    for jid, node in node_of.items():
        if jid not in outcomes:
            g = speeds.node_type[node]
            outcomes[jid] = run_alone(member(jid, g, speeds.solo(live[jid].job, g, strategies.get(jid))), round_s)
    return outcomes, infeasible


def account(decision: RoundDecision, live: dict[str, LiveJob], outcomes: dict[str, Outcome], now: float,
            round_s: float, views: dict[str, JobView]) -> set[str]:
    """Each job's counters after the round; returns the finished jobs and refreshes the views of the
    jobs that ran and go on."""
    finished = set()
    for jid in decision.preempted:
        if jid in live:
            live[jid].preemptions += 1
    for jid in decision.migrated:
        live[jid].migrations += 1
    for jid, o in outcomes.items():
        s = live[jid]
        held = round_s if o.finish is None else min(round_s, o.finish)
        s.remaining = s.remaining - o.work if o.finish is None else 0.0
        s.done_work += o.work
        s.executed += held
        s.attained += held * s.job.num_gpus
        s.rounds_run += 1
        if o.packed_s > 0:
            s.packed_s += o.packed_s
            s.rounds_packed += 1
        if s.start is None:
            s.start = now
        if o.finish is not None:
            s.finish = now + o.finish
            finished.add(jid)
        else:
            views[jid] = view_of(s, True)
    return finished
