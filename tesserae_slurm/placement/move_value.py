"""Moves that pay for themselves: what keeping, moving and preempting running jobs is worth in a round.

The paper's placement rebuilds the plan from nothing every round (Listing 1) and migration
minimization relabels it onto the GPUs in use; when the policy's order changes, best fit groups jobs
onto nodes differently and jobs move although nothing new runs. Here (``EngineConfig.moves``) the
engine walks the policy's order on the physical GPUs instead, each running job keeping its GPUs
(``keep_walk``): a job the policy ranks higher displaces a running one only where what that stop
costs is less than the job is worth. When the kept plan strands a job (waiting with enough GPUs
free, on too many nodes), the paper's plan (best fit from nothing, relabeled) is the alternative: it
replaces the kept plan only if it places a job of higher priority and what it gains exceeds what its
extra moves cost. (Walking the stranded job first in the kept plan, a third candidate, was chosen too
rarely to pay for its packing: tried on every suite of docs/results.md.)

Units of account: GPU-seconds of work at a job's speed alone. Placing job j for its horizon (its
remaining time when the shell knows it, else ``MoveCosts.horizon_s``, whichever is shorter) is worth
``GPUs x speed x horizon``; moving or preempting it costs ``GPUs x speed now x MoveCosts.seconds(model)``,
once more per move it made in the last ``recent_rounds`` rounds (hysteresis: a job that just moved
is dearer to move again). A running job that would finish within its move cost is never displaced.
A packed pair splits (its lower-ranked member moves away to run alone) only when the two members' gain
in speed over the horizon exceeds that member's move cost; a partner stays with its host while both run.
Every move left in the final plan gets a reason (``MoveReason``): whom it made room for, or the faster
placement it bought, or the GPU limit that stopped it; a move that bought nothing is undone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

import numpy as np

from ..model import Cluster, Job, PackedPair, Placement, PlanRows
from ..model.moves import MoveCosts, MoveReason
from ..model.placement import GpuRef
from ..profiles import ThroughputProfile
from ..profiles.keys import PairOption
from .arrays import gpu_layout
from .consolidate import Homes

_EPS = 1e-9


class KeepUnits(NamedTuple):
    """The keep-first walk's units: job ids in unit order, GPUs and jobs per unit (``width`` None: one
    each), GPU-type orders (None: the cluster's), and their homes; ``js``, ``firsts`` (each unit's
    first job in ``js``) and ``partner_of`` (a kept pair's partner by position) give each unit's jobs."""

    ids: list[str]
    need: np.ndarray
    width: np.ndarray | None
    types: list[tuple[str, ...] | None] | None
    js: Sequence[Job]
    firsts: np.ndarray
    partner_of: Mapping[int, int]
    homes: Homes

    @property
    def jobs(self) -> list[tuple[Job, ...]]:
        """Each unit's jobs (node rules read them)."""
        js, p = self.js, self.partner_of
        return [(js[f], js[p[f]]) if f in p else (js[f],) for f in self.firsts.tolist()]


class Plan(NamedTuple):
    """A candidate outcome of a round: the final physical plan, its pairs and who it moves."""

    final: Placement
    pairs: tuple[PackedPair, ...]
    migrated: tuple[str, ...]
    preempted: frozenset[str]


def _rows_by_job(table: np.ndarray, ids: Sequence[str]) -> dict[str, list[int]]:
    """Each job's GPU rows in ``table`` (job numbers into ``ids``), sorted (Python lists: thousands of
    small arrays cost more to make than the walk that reads them)."""
    at = np.arange(len(table))
    h0, h1 = table[:, 0] >= 0, table[:, 1] >= 0
    job = np.concatenate((table[h0, 0], table[h1, 1]))
    row = np.concatenate((at[h0], at[h1]))
    order = np.lexsort((row, job))
    job, rows = job[order], row[order].tolist()
    if not len(job):
        return {}
    cut = (np.flatnonzero(np.diff(job)) + 1).tolist()
    lo, hi = [0, *cut], [*cut, len(rows)]
    return dict(zip([ids[k] for k in job[lo].tolist()], map(rows.__getitem__, map(slice, lo, hi))))


class MoveValue:
    """One round's view of the running jobs: where they are, what moving each costs, what placing a job
    gains, and the decisions that follow (homes for the keep-first walk, pairs kept together, the
    choice between plans, the reasons of the moves)."""

    def __init__(self, cluster: Cluster, current: Placement, jobs: Sequence[Job], costs: MoveCosts,
                 profile: ThroughputProfile, remaining: Mapping[str, float],
                 recent: Mapping[str, Sequence[Sequence[GpuRef]]], held: frozenset[str],
                 ruled: frozenset[str] = frozenset(), cross_user: str = "timeslice") -> None:
        self.cluster, self.costs, self.profile = cluster, costs, profile
        self.cross_user = cross_user  # how two users' pairs run, as packing scores them (pack.py)
        ids = [j.id for j in jobs]
        self.by_id = dict(zip(ids, jobs))
        self.rank = dict(zip(ids, range(len(ids))))
        names, sizes = cluster.shape
        self.layout = gpu_layout(names, sizes)
        self.node_type = cluster.node_types
        self.current = current
        cur = current.rows()
        table = _in_layout(cur, names, sizes, self.layout.row_of)
        self.rows_now = _rows_by_job(table, cur.ids)
        self.partner_now: dict[str, str] = {}
        two = table[(table[:, 0] >= 0) & (table[:, 1] >= 0)]
        if len(two):  # two jobs share every GPU of both: they are packed together
            held_rows = np.bincount(table[table >= 0], minlength=len(cur.ids))
            pair, shared = np.unique(np.sort(two, axis=1), axis=0, return_counts=True)
            whole = (held_rows[pair[:, 0]] == shared) & (held_rows[pair[:, 1]] == shared)
            a_ids = list(map(cur.ids.__getitem__, pair[whole, 0].tolist()))
            b_ids = list(map(cur.ids.__getitem__, pair[whole, 1].tolist()))
            self.partner_now.update(zip(a_ids, b_ids))
            self.partner_now.update(zip(b_ids, a_ids))
        self.remaining, self.recent, self.held = remaining, recent, held
        self.ruled = ruled  # jobs under an operator's node rule: a move the rule forces is never undone
        self._speed: dict[str, float] = {}
        self._cost: dict[str, float] = {}
        self._seconds: dict[str, float] = {}
        self._alone_memo: dict[tuple[str, str], float] = {}
        self._pair_memo: dict[tuple[str, str, str, str], PairOption | None] = {}
        # a pair is split only where one member could run alone: a node with that many idle GPUs
        idle = np.bincount(self.layout.node_of[(table[:, 0] < 0) & (table[:, 1] < 0)], minlength=len(names))
        most = int(idle.max(initial=0))
        active_pairs: set[tuple[str, str]] = set()
        for a, b in self.partner_now.items():
            if a in self.rank and b in self.rank and a not in held and b not in held:
                active_pairs.add((a, b) if self.rank[a] < self.rank[b] else (b, a))
        self.kept_pairs: tuple[tuple[str, str], ...] = tuple(sorted(
            (p for p in active_pairs if self.by_id[p[0]].num_gpus <= most and not self._split_pays(*p)),
            key=lambda p: self.rank[p[0]]))
        self._in_kept = {j: p for p in self.kept_pairs for j in p}

    # ---- worth and cost ---------------------------------------------------------------------------
    def horizon(self, job: str) -> float:
        rem = self.remaining.get(job)
        return self.costs.horizon_s if rem is None else min(rem, self.costs.horizon_s)

    def value(self, job: str, speed: float = 1.0) -> float:
        """What running ``job`` at ``speed`` for its horizon is worth (GPU-seconds of work)."""
        return self.by_id[job].num_gpus * speed * self.horizon(job)

    def speed_now(self, job: str) -> float:
        """Its normalized speed where it runs now (alone: its best strategy there; packed: the pair's)."""
        s = self._speed.get(job)
        if s is None:
            s = self._speed[job] = self._speed_in(job, self.partner_now.get(job))
        return s

    def _gpu_type(self, job: str) -> str:
        rows = self.rows_now.get(job)
        if rows is None or len(self.cluster.gpu_types) == 1:
            return self.cluster.gpu_types[0]
        return self.node_type[self.layout.refs[int(rows[0])][0]]

    def _speed_in(self, job: str, partner: str | None) -> float:
        j = self.by_id.get(job)
        if j is None:
            return 1.0
        gpu_type = self._gpu_type(job)
        if partner is not None and partner in self.by_id:
            best = self.pair(j, self.by_id[partner], gpu_type)
            return best.a_speed if best is not None else 0.0
        return self.alone(j, gpu_type)

    def alone(self, j: Job, gpu_type: str) -> float:
        """Its best speed alone on ``gpu_type`` (looked up once a round per job class)."""
        key = (j.class_key, gpu_type)
        s = self._alone_memo.get(key)
        if s is None:
            s = self._alone_memo[key] = float(self.profile.best_isolated_many([j], [gpu_type])[0][0])
        return s

    def pair(self, a: Job, b: Job, gpu_type: str) -> PairOption | None:
        """The profile's best option for ``a`` packed with ``b`` (once a round per pair of classes and
        sharing): two users' jobs time-slice the GPU unless the site scores them as one user's."""
        sharing = "timeslice" if self.cross_user == "timeslice" and a.user != b.user else "mps"
        key = (a.class_key, b.class_key, gpu_type, sharing)
        if key not in self._pair_memo:
            self._pair_memo[key] = self.profile.best_pair(a, b, gpu_type, sharing)
        return self._pair_memo[key]

    def moves_recently(self, job: str) -> int:
        """Placement changes of ``job`` over the last ``recent_rounds`` rounds (the shell's record)."""
        if not self.recent or job not in self.recent:
            return 0
        before = [tuple(r) for r in self.recent[job]][:self.costs.recent_rounds]
        rows = self.rows_now.get(job)
        now = tuple(sorted(map(self.layout.refs.__getitem__, rows))) if rows is not None else ()
        seq = [s for s in [now, *before] if s]
        return sum(1 for a, b in zip(seq, seq[1:]) if a != b)

    def cost(self, job: str) -> float:
        """What moving or preempting ``job`` costs it (GPU-seconds of work), dearer when it moved lately."""
        c = self._cost.get(job)
        if c is None:
            j = self.by_id.get(job)
            if j is None:
                c = 0.0
            else:
                s = self._seconds.get(j.model)
                if s is None:
                    s = self._seconds[j.model] = self.costs.seconds(j.model)
                c = j.num_gpus * self.speed_now(job) * s * (1 + self.moves_recently(job))
            self._cost[job] = c
        return c

    def costs_of(self, jobs: Sequence[str]) -> np.ndarray:
        """``cost`` of each of ``jobs`` (running ones), in one pass (the walk asks for every running job)."""
        if self.recent:  # hysteresis: a job's own history
            return np.fromiter(map(self.cost, jobs), np.float64, len(jobs))
        out = np.empty(len(jobs))
        seconds, partner, by_id = self._seconds, self.partner_now, self.by_id
        one = len(self.cluster.gpu_types) == 1
        for k, j in enumerate(jobs):
            c = self._cost.get(j)
            if c is None:
                job = by_id.get(j)
                if job is None:
                    c = 0.0
                else:
                    s = seconds.get(job.model)
                    if s is None:
                        s = seconds[job.model] = self.costs.seconds(job.model)
                    speed = self.alone(job, self.cluster.gpu_types[0]) if one and j not in partner \
                        else self.speed_now(j)
                    c = self._cost[j] = job.num_gpus * speed * s
            out[k] = c
        return out

    def protected(self, job: str) -> bool:
        """It would finish before a move could pay off: displacing it never does."""
        rem = self.remaining.get(job)
        j = self.by_id.get(job)
        return rem is not None and j is not None and rem <= self.costs.seconds(j.model)

    def _split_pays(self, a: str, b: str) -> bool:
        """Splitting the pair ``a`` (ranked higher) and ``b``: both run alone at full speed instead of
        packed, for the cost of moving ``b``."""
        gain = sum(self.by_id[x].num_gpus * (self.alone(self.by_id[x], self._gpu_type(x)) - self.speed_now(x))
                   * self.horizon(x) for x in (a, b))
        return gain > self.cost(b) + _EPS

    # ---- the keep-first walk's units --------------------------------------------------------------
    def units(self, js: Sequence[Job], types: Callable[[Job], tuple[str, ...] | None] | None) -> KeepUnits:
        """The walk's units in ``js``'s order (a kept pair as one unit at its higher member's place) and
        their homes, in passes over ``js`` and one step per running job (the walk sees every active job
        every round: 50,000 at scale)."""
        ids_all = [j.id for j in js]
        n = len(ids_all)
        need_all = np.fromiter([j.num_gpus for j in js], np.int64, n)
        pos_all = dict(zip(ids_all, range(n)))
        pairs = [(pos_all[a], pos_all[b]) for a, b in self.kept_pairs if a in pos_all and b in pos_all]
        if pairs:
            keep = np.ones(n, dtype=np.bool_)
            keep[[b for _, b in pairs]] = False
            firsts = np.flatnonzero(keep)
            unit_of = np.cumsum(keep) - 1
            width = np.ones(len(firsts), dtype=np.int64)
            width[unit_of[[a for a, _ in pairs]]] = 2
            at = np.cumsum(width) - width  # each unit's first job among the ids, its partner right after
            order = np.empty(int(width.sum()), dtype=np.int64)
            order[at] = firsts
            order[at[unit_of[[a for a, _ in pairs]]] + 1] = [b for _, b in pairs]
            ids = list(map(ids_all.__getitem__, order.tolist()))
            partner_of = dict(pairs)
        else:
            firsts, width, ids, partner_of = np.arange(n), None, ids_all, {}
        count = len(firsts)
        need = need_all[firsts]
        first_ids = ids_all if not pairs else list(map(ids_all.__getitem__, firsts.tolist()))
        unit_types = [types(js[k]) for k in firsts.tolist()] if types is not None else None
        pos = pos_all if not pairs else dict(zip(first_ids, range(count)))
        lengths = np.zeros(count, dtype=np.int64)
        homes: dict[int, list[int]] = {}
        need_of = need.tolist()
        for j, rows in self.rows_now.items():
            k = pos.get(j)
            if k is None or len(rows) != need_of[k]:
                continue
            if partner_of and firsts[k] in partner_of and self.rows_now.get(ids_all[partner_of[firsts[k]]]) != rows:
                continue
            homes[k] = rows
        at_home = sorted(homes)
        lengths[at_home] = [len(homes[k]) for k in at_home]
        start = np.zeros(count + 1, dtype=np.int64)
        np.cumsum(lengths, out=start[1:])
        flat = np.fromiter((r for k in at_home for r in homes[k]), np.int64, int(start[-1]))
        protect = np.zeros(count, dtype=np.bool_)
        modest = np.zeros(count, dtype=np.bool_)
        cost = np.zeros(count)
        if at_home:
            home_ids = list(map(ids_all.__getitem__, firsts[at_home].tolist()))
            cost[at_home] = self.costs_of(home_ids)
            for k, f in zip(at_home, firsts[at_home].tolist()):
                if f in partner_of:
                    cost[k] += self.cost(ids_all[partner_of[f]])
            if self.remaining:
                for k, f in zip(at_home, firsts[at_home].tolist()):
                    members = (ids_all[f], ids_all[partner_of[f]]) if f in partner_of else (ids_all[f],)
                    protect[k] = all(map(self.protected, members))
        if self.partner_now:  # the lower member of a pair that may split
            rank = self.rank
            guests = [j for j, h in self.partner_now.items() if h in rank and j in pos and rank[h] < rank[j]]
            modest[[pos[j] for j in guests if int(firsts[pos[j]]) not in partner_of]] = True
        h = self.costs.horizon_s
        value = need * h  # GPUs x horizon; a kept pair's partner adds its own
        for a, b in pairs:
            value[pos[ids_all[a]]] += need_all[b] * h
        if self.remaining:
            for j, rem in self.remaining.items():
                k = pos_all.get(j)
                if k is not None and rem < h:
                    unit = pos.get(j)
                    if unit is None:  # a kept pair's partner
                        unit = pos[ids_all[next(a for a, b in pairs if b == k)]]
                    value[unit] -= need_all[k] * (h - rem)
        return KeepUnits(ids, need, width, unit_types, js, firsts, partner_of,
                         Homes(start, flat, protect, modest, value.astype(np.float64), cost))

    def kept_pair_list(self, placed: Sequence[str]) -> list[tuple[str, str]]:
        """The kept pairs both of whose members the walk placed."""
        there = set(placed)
        return [p for p in self.kept_pairs if p[0] in there and p[1] in there]

    def sticky_pairs(self, placed: Sequence[Job], waiting: Sequence[Job]) -> list[tuple[str, str]]:
        """(host, partner) of the pairs running now whose host the walk placed alone and whose partner
        waits: they stay together (a partner changes hosts only when its host stops)."""
        if not self.partner_now:
            return []
        hosts = {j.id for j in placed}
        guests = {j.id for j in waiting}
        return sorted(((h, g) for g, h in self.partner_now.items()
                       if g in guests and h in hosts and g not in self._in_kept), key=lambda p: self.rank[p[1]])

    # ---- choosing among plans ---------------------------------------------------------------------
    def _speeds_of(self, plan: Plan) -> dict[str, float]:
        s: dict[str, float] = {}
        for p in plan.pairs:
            s[p.placed], s[p.partner] = p.placed_speed, p.partner_speed
        return s

    def _net(self, plan: Plan, base: Plan) -> tuple[bool, float, float]:
        """(``plan`` places a job of higher priority than ``base`` does, its gain over ``base``, its extra
        cost): the first job in policy order that one places and the other does not decides priority."""
        a, b = plan.final.jobs(), base.final.jobs()
        differ = sorted((a ^ b) & self.rank.keys(), key=self.rank.__getitem__)
        ahead = bool(differ) and differ[0] in a
        sa, sb = self._speeds_of(plan), self._speeds_of(base)
        gain = (sum(self.value(j, sa.get(j, 1.0)) for j in a - b if j in self.by_id)
                - sum(self.value(j, sb.get(j, 1.0)) for j in b - a if j in self.by_id))
        moved_a = set(plan.migrated) | plan.preempted
        moved_b = set(base.migrated) | base.preempted
        cost = sum(map(self.cost, moved_a)) - sum(map(self.cost, moved_b))
        return ahead, gain, cost

    def net_gain(self, kept: Plan, plan: Plan) -> float | None:
        """What ``plan`` gains over ``kept`` less its extra moves' cost, when it may replace it (it places a
        job of higher priority, disturbs no protected job, and gains more than it costs); else None."""
        disturbed = set(kept.migrated) | kept.preempted
        if any(self.protected(j) for j in (set(plan.migrated) | plan.preempted) - disturbed):
            return None
        ahead, gain, cost = self._net(plan, kept)
        return gain - cost if ahead and gain - cost > _EPS else None

    # ---- what each move bought --------------------------------------------------------------------
    def settle(self, final: Placement, migrated: Sequence[str]) -> Placement:
        """``final`` with every move that bought nothing undone: a job alone before and after whose old
        GPUs no job took goes back to them (so a shift between the GPUs of one node happens only when
        a job needs those GPUs)."""
        if not migrated:
            return final
        rows = final.rows()
        names, sizes = self.cluster.shape
        table = _in_layout(rows, names, sizes, self.layout.row_of)
        ids = list(rows.ids)
        number = {j: k for k, j in enumerate(ids)}
        changed = False
        for j in migrated:
            old = self.rows_now.get(j)
            if old is None or j in self.partner_now or j not in number or j in self.ruled:
                continue
            k = number[j]
            new = np.flatnonzero((table[:, 0] == k) | (table[:, 1] == k))
            if (table[new, 1] >= 0).any() or len(new) != len(old):  # packed now: not a bare move
                continue
            if (table[old] >= 0).any() and not np.isin(table[old], [-1, k]).all():
                continue  # some job took its old GPUs: the move made room
            table[new, 0] = -1
            table[old, 0] = k
            changed = True
        if not changed:
            return final
        back = PlanRows(names, sizes, tuple(ids), table)
        return Placement.from_rows(back) if rows.names == names else _reorder(back, rows.names)

    def reasons(self, final: Placement, migrated: Sequence[str], preempted: Sequence[str],
                pairs: Sequence[PackedPair], speeds: Mapping[str, float],
                limited: Mapping[str, str] | None = None) -> tuple[MoveReason, ...]:
        """One reason per migrated or preempted job: whom it made room for, or the faster placement it
        bought, with the gain and the cost (GPU-seconds of work over the horizon). ``limited``: the jobs
        their user's or account's GPU limit holds back (job -> the limit's words): a running one stopped
        for its limit, not for the job that took its GPUs, and its note says so."""
        if not migrated and not preempted:
            return ()
        names, sizes = self.cluster.shape
        after = _in_layout(final.rows(), names, sizes, self.layout.row_of)
        ids_after = final.rows().ids
        placed_after = set(ids_after)
        partner_after: dict[str, str] = {}
        for pair in pairs:
            partner_after[pair.placed], partner_after[pair.partner] = pair.partner, pair.placed
        before_jobs = self.current.jobs()
        out: list[MoveReason] = []
        for action, jobs in (("migrate", migrated), ("preempt", preempted)):
            for j in jobs:
                old = self.rows_now.get(j)
                if old is None:
                    continue
                there = {ids_after[x] for x in after[old].ravel().tolist() if x >= 0} - {j}
                took = sorted((b for b in there if not self._shared_before(b, old)),
                              key=lambda b: self.rank.get(b, len(self.rank)))
                cost = self.cost(j)
                before = self.speed_now(j)
                now_speed = speeds.get(j, 0.0) if action == "migrate" else 0.0
                if action == "preempt" and limited and j in limited:
                    out.append(MoveReason(j, action, "limit", (), 0.0, cost, before, now_speed,
                                          f"its GPU limit stopped it ({limited[j]}); cost {cost:.0f} GPU-s"))
                elif took:
                    gain = sum(self.value(b, speeds.get(b, 1.0)) for b in took if b not in before_jobs)
                    started = [b for b in took if b not in before_jobs]
                    detail = (f"made room for {', '.join(took)}"
                              + (f" (started: {', '.join(started)})" if started else "")
                              + f"; gain {gain:.0f} GPU-s over {self._horizon_text(took)}, cost {cost:.0f} GPU-s")
                    out.append(MoveReason(j, action, "room", tuple(took), gain, cost, before, now_speed, detail))
                elif action == "migrate" and j in self.partner_now and j not in partner_after:
                    other = self.partner_now[j]
                    gain = sum(self.by_id[x].num_gpus * (speeds.get(x, 1.0) - self.speed_now(x)) * self.horizon(x)
                               for x in (j, other) if x in self.by_id and x in placed_after)
                    out.append(MoveReason(j, action, "unpack", (other,), gain, cost, before, now_speed,
                                          f"left {other} to run alone (speed {before:.2f} -> {now_speed:.2f}); gain "
                                          f"{gain:.0f} GPU-s, cost {cost:.0f} GPU-s"))
                elif action == "migrate" and j in partner_after:
                    other = partner_after[j]
                    gain = sum(self.by_id[x].num_gpus * (speeds.get(x, 1.0) - self.speed_now(x)) * self.horizon(x)
                               for x in (j, other) if x in self.by_id)
                    out.append(MoveReason(j, action, "pack", (other,), gain, cost, before, now_speed,
                                          f"joined {other} on its GPUs (speed {before:.2f} -> {now_speed:.2f}); gain "
                                          f"{gain:.0f} GPU-s, cost {cost:.0f} GPU-s"))
                elif j in self.ruled:
                    out.append(MoveReason(j, action, "rule", (), 0.0, cost, before, now_speed,
                                          f"an operator's node rule keeps it off its GPUs; cost {cost:.0f} GPU-s"))
                else:
                    why = ("its GPUs were left free: ranked below the jobs that run, it fit nowhere"
                           if action == "preempt" else "no job took its GPUs")
                    out.append(MoveReason(j, action, "stop" if action == "preempt" else "none", (), 0.0, cost,
                                          before, now_speed, f"{why}; cost {cost:.0f} GPU-s"))
        return tuple(out)

    def _shared_before(self, job: str, rows: Sequence[int]) -> bool:
        """``job`` was on one of ``rows`` already (a partner that stays where it was)."""
        mine = self.rows_now.get(job)
        return mine is not None and not set(mine).isdisjoint(rows)

    def _horizon_text(self, jobs: Sequence[str]) -> str:
        hs = sorted({round(self.horizon(b)) for b in jobs if b in self.by_id})
        return " / ".join(f"{h} s" for h in hs) or "0 s"


def _in_layout(rows: PlanRows, names: tuple[str, ...], sizes: tuple[int, ...],
               row_of: Mapping[tuple[str, int], int]) -> np.ndarray:
    """A plan's table with its rows in the cluster's layout (the same table when the node order is the
    cluster's)."""
    if rows.names == names and rows.sizes == sizes:
        return rows.table.copy()
    own = gpu_layout(rows.names, rows.sizes)
    at = np.fromiter((row_of[ref] for ref in own.refs), np.int64, len(own.refs))
    table = np.full((sum(sizes), 2), -1, dtype=np.int64)
    table[at] = rows.table
    return table


def _reorder(rows: PlanRows, names: tuple[str, ...]) -> Placement:
    """The plan of ``rows`` (the cluster's node order) with its nodes in the order ``names``."""
    p = Placement.from_rows(rows)
    nodes = p.nodes
    return Placement({n: nodes[n] for n in names})
