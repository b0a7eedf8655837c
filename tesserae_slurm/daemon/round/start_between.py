"""Starts between rounds: a job submitted (or GPUs left free) between rounds starts within a second or
so, where the round would put it, when the GPUs the round gives it are free now.

``Watch`` reads the daemon's cheap poll between rounds (``squeue -h -p PARTITION -o "%i %t"``, every
``slurm.poll_seconds``) and says when a pass is worth it: a job the daemon has not seen, or one gone.
Where Slurm has the lighter ``squeue --only-job-state`` (24.11 and later), that is the poll, and the
partition is listed only when some job of the cluster came or went.
The pass runs the round's own steps (observe, reconcile, the guard's holds and evictions, inputs, and
``rank_and_decide`` on the current placement) and carries out only the decision's starts onto GPUs
nobody holds now (no running job, no stop in progress) whose packing partner, if any, starts with
them (``free_starts``). Stops, moves and packing onto running jobs stay with the round. The decision
gives GPUs to the jobs the policy ranks first, so a job started here never takes GPUs the decision
gave a job ranked ahead of it: that job waits for the round, and its GPUs stay free meanwhile.

A pass that starts something is recorded like a round (kind ``start``), with the decision as carried
out (``carried_out``): the running jobs where they are, the started ones added, and every other job's
reason; a job the decision runs on GPUs that running jobs hold now waits with reason ``Round``.

The policy's state is not saved from a pass. It is the memory of rounds (Tiresias' queues and waits,
Gavel's and Themis' rounds received); a pass that advanced it would make that memory depend on how
often jobs arrive. The pass ranks from the state of the last round, as the next round will, so it
decides what that round would decide now, and the next round's ranking is the one it would have been.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from ...model import PackedPair, PendingJob, PendingReason, Placement, RoundDecision
from ..state.gpuset import format_gpus
from ..state.store import JobRow
from .actions import Action, RoundPlan, Target
from .decide import Decided
from .inputs import RoundInputs
from .observe import Snapshot

# squeue's compact codes of jobs that have ended (they drop out of its listing soon after)
ENDED = frozenset({"CD", "CA", "F", "TO", "NF", "OOM", "PR", "BF", "DL", "RV", "SE"})


@dataclass
class Watch:
    """What the daemon has seen of the partition's jobs: ``known`` ids (listed or observed), ``listed``
    the ones not ended at the last look; and ``everywhere``, every job not ended in the cluster at the
    last light look (``moved``). Pure: the loop feeds it listings and snapshots."""

    known: set[str] = field(default_factory=set)
    listed: set[str] = field(default_factory=set)
    everywhere: frozenset[str] | None = None

    def moved(self, states: Iterable[tuple[str, str]]) -> bool:
        """Whether any job of the cluster came, went or ended since the last light look (Slurm's
        REQUEST_JOB_STATE, which cannot filter by partition): only then is the partition listed."""
        now = frozenset(j for j, code in states if code not in ENDED)
        moved, self.everywhere = now != self.everywhere, now
        return moved

    def forget(self) -> None:
        """A look or a pass failed: whatever moved is news again at the next poll."""
        self.known, self.listed, self.everywhere = set(), set(), None

    def saw(self, snap: Snapshot) -> None:
        """A round or a pass observed Slurm: what it saw needs no pass."""
        ids = {j for j, mj in snap.jobs.items() if not mj.slurm.state.is_finished}
        self.known |= ids
        self.listed = ids

    def news(self, polled: Iterable[tuple[str, str]]) -> str:
        """What the poll shows that the last look did not ("" if nothing): new jobs, jobs gone or ended."""
        now = dict(polled)
        listed = {j for j, code in now.items() if code not in ENDED}
        new = sorted(set(now) - self.known, key=_by_id)
        gone = sorted(self.listed - listed, key=_by_id)
        self.known, self.listed = set(now), listed
        return "; ".join(part for part in (f"new job(s) {','.join(new)}" if new else "",
                                           f"job(s) {','.join(gone)} gone" if gone else "") if part)


def _by_id(j: str) -> tuple[int, str]:
    return (int(j) if j.isdigit() else 0, j)


def free_starts(plan: RoundPlan, busy: Mapping[tuple[str, int], set[str]]) -> tuple[Action, ...]:
    """The plan's starts whose GPUs nobody holds now (``busy``: who holds each GPU, ``apply.occupied``),
    and whose packing partner, if any, starts here too (never a running job: packing onto it is the
    round's). In the plan's order: the policy's."""
    starts = {a.job_id: a for a in plan.actions if a.kind == "start" and a.target is not None}

    def free(t: Target) -> bool:
        return not any(busy.get((n, g)) for n, idx in t.gpus.items() for g in idx)

    ok = {j for j, a in starts.items() if a.target is not None and free(a.target)}
    ok = {j for j in ok if not starts[j].target.partner or starts[j].target.partner in ok}  # type: ignore[union-attr]
    return tuple(starts[j] for j in starts if j in ok)


def carried_out(decided: Decided, inp: RoundInputs, chosen: tuple[Action, ...],
                running: Mapping[str, JobRow]) -> Decided:
    """The pass's decision as it happens: the jobs placed now (``inp.actual``) where they are, described
    by their rows (``running``: partner, strategy, speed), plus the ``chosen`` starts of ``decided``.
    Every other job waits: with the decision's own reason, or ``Round`` when the decision places it on
    GPUs that are not free now."""
    d = decided.decision
    started = {a.job_id: a for a in chosen}
    # the recorded decision's nodes, in Slurm's GPU indices, with the GPUs foreign jobs hold marked
    slots = {n: [{j for j in slot if j.startswith("foreign:")} for slot in gpus]
             for n, gpus in d.placement.nodes.items()}
    where = {**inp.actual, **{j: a.target.gpus for j, a in started.items() if a.target is not None}}
    placed: set[str] = set()
    for job, gpus in where.items():
        for node, idx in gpus.items():
            for g in idx:
                if node in slots and 0 <= g < len(slots[node]):
                    slots[node][g].add(job)
                    placed.add(job)
    placement = Placement({n: tuple(frozenset(s) for s in gpus) for n, gpus in slots.items()})
    kept = tuple(j for j in inp.actual if j in placed)
    targets = {j: Target(dict(inp.actual[j]), running[j].packed_with, running[j].strategy, running[j].speed)
               for j in kept if j in running}
    targets.update({j: a.target for j, a in started.items() if a.target is not None})
    packed = [p for p in d.packed if p.placed in started and p.partner in started]
    for x, y in sorted({(min(j, t.partner), max(j, t.partner)) for j, t in targets.items()
                        if j in kept and t.partner in kept}):
        packed.append(PackedPair(x, y, targets[x].speed, targets[y].speed, targets[x].strategy or None,
                                 targets[y].strategy or None))
    waiting = [p for p in d.pending if p.job_id not in placed]
    for a in decided.plan.actions:
        if a.kind == "start" and a.job_id not in started and a.target is not None:
            waiting.append(PendingJob(a.job_id, PendingReason.ROUND,
                                      f"the policy's decision runs it on {format_gpus(a.target.gpus)}, which running "
                                      "jobs hold now; between rounds the daemon starts jobs on free GPUs only, so "
                                      "it waits for the next round"))
    plan = RoundPlan(targets, chosen, tuple(j for j in kept if j in targets))
    record = RoundDecision(
        placement, started=tuple(started), preempted=(), migrated=(), kept=kept, packed=tuple(packed),
        pending=tuple(waiting),
        strategies={j: t.strategy for j, t in targets.items() if t.strategy},
        speeds={j: t.speed for j, t in targets.items()}, timings=d.timings)
    return replace(decided, decision=record, plan=plan)

