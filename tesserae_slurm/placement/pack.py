"""Packing (paper Algorithm 3): pair pending jobs with placed ones by max-weight bipartite matching.

One matching problem per GPU count (only jobs of the same GPU count can share GPUs). An edge joins
a pending and a placed job when the profile measured them together, both speeds are > 0 (no OOM),
neither job is ``no_pack``, both are of one ``group`` (``Job.group``; "" everywhere: no restriction),
the placed job has no partner yet, and packing raises total normalized
throughput over the placed job alone: the edge weight -- the pair's speed sum under the best
strategies both jobs allow (paper "Parallelism Strategy") -- exceeds the placed job's best isolated
speed.

Packing without victims (``min_speed``, beyond the paper): the matching maximizes the *sum* of
normalized speeds, so it happily slows one job to 0.2 if its partner runs at 0.95. With
``min_speed`` = m > 0 an edge exists only if both jobs run at >= m in the pair (the pair's best
option by speed sum, as the table holds it: a pair whose best option slows one member below m is
dropped, not re-chosen among slower options); ``ClassTable.slowest`` holds the slower member's speed
of every class pair, and the mask is one numpy ``where`` over the class matrix.

Two users' jobs (``cross_user="timeslice"``, the default): CUDA runs one MPS server per GPU at a time,
so the servers of two users time-slice the GPU instead of running both jobs at once. Such a pair is
scored with the profile's time-sliced speeds (measured with ``tesserae profile --mps off``, else the
documented fallback: 0.45 of each job's speed alone), never with the MPS speeds one user's jobs get.
``cross_user="mps"`` scores every pair with the MPS speeds (what the engine did before, and what a
site whose users share one MPS server would want). Jobs of one class and one user are then
interchangeable: the class numbers below become (class, user) numbers for the call.

Pairs below one (beyond the paper): a pair whose normalized speeds sum below 1.0 delivers less than
either job alone at its best, so it is never formed (``below_one=False``, the default) unless a site
asks; with every job at 1.0 alone the throughput objective already drops such pairs, and the rule
matters for jobs restricted to a slower strategy and for time-sliced pairs.

Jobs fall into a few profile classes, and jobs of one class are interchangeable, so the job-level
matrix only repeats a small (class, GPU type) x class matrix from the profile's class table
(``ClassTable``, built with the profile): medium problems go to one assignment on the job-level
matrix (capped to the jobs that can matter; compiled in ``pack_match``), large ones to the
equivalent transportation LP between groups (HiGHS; integral at its vertices), which keeps memory
linear in jobs.

Objectives, for a fixed set of placed jobs (they run whether packed or not):

* ``throughput`` (default) maximizes the cluster's total normalized throughput, i.e. the sum over
  matched pairs of ``weight - isolated speed of the placed job``;
* ``paper-sum`` maximizes the sum of matched edge weights, as Algorithm 3 is written.

They differ when placed jobs run alone at different speeds. Example: placed A is an LLM restricted
to a strategy that runs alone at 0.78, placed B runs alone at 1.0, and pending C packs with A at a
sum of 1.5 or with B at 1.6. ``paper-sum`` picks B+C (1.6 > 1.5) and the cluster runs at
0.78 + 1.6 = 2.38; ``throughput`` picks A+C (gain 0.72 > 0.6) and the cluster runs at 1.5 + 1.0 = 2.5.

Ties: jobs of one profile class are interchangeable, so among them partners go to the earliest in
input order (policy priority); other ties are settled by the solver, deterministically for the same
input. A gain below 1e-6 counts as no gain (float noise, not throughput).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress, count, filterfalse
from operator import attrgetter
from typing import Literal

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix

from ..model import InputError, Job, PackedPair
from ..profiles import ThroughputProfile
from ..profiles.classes import ClassTable
from . import pack_match

PackingMode = Literal["off", "on", "single"]
Objective = Literal["throughput", "paper-sum"]
CrossUser = Literal["timeslice", "mps"]
MODES: tuple[str, ...] = ("off", "on", "single")
OBJECTIVES: tuple[str, ...] = ("throughput", "paper-sum")
CROSS_USER: tuple[str, ...] = ("timeslice", "mps")
ONE = 1.0 - 1e-9  # a pair's speed sum must reach this unless pairs below one are allowed (float noise)
ASSIGNMENT_LIMIT = 40_000  # job-level matrices up to ~200 x 200 go to one assignment; larger ones to the LP


@dataclass(frozen=True)
class PackingResult:
    pairs: tuple[PackedPair, ...]  # in the order of the placed jobs
    unmatched: tuple[str, ...]  # pending job ids given but not packed, in the order given


def pack(placed: Sequence[Job], pending: Sequence[Job], profile: ThroughputProfile,
         gpu_type_of: Mapping[str, str], *, mode: PackingMode = "on", objective: Objective = "throughput",
         exclude: Collection[str] = (), min_speed: float = 0.0, cross_user: CrossUser = "timeslice",
         below_one: bool = False, _assignment_limit: int | None = ASSIGNMENT_LIMIT) -> PackingResult:
    """Pack pending jobs onto placed ones; ``exclude``: placed ids that already have a partner;
    ``min_speed``: a pair is formed only if each member runs at least this normalized speed in it
    (its speed packed / its best speed alone; 0 = any pair that raises throughput); ``cross_user``:
    how pairs of two users' jobs are scored (above); ``below_one``: allow pairs whose speeds sum
    below 1.0.

    ``_assignment_limit`` (tests only): largest job-level matrix solved directly; None = always.
    """
    if mode not in MODES:
        raise InputError(f"packing mode must be one of {', '.join(MODES)}, got {mode!r}")
    if objective not in OBJECTIVES:
        raise InputError(f"packing objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    check_min_speed(min_speed)
    if cross_user not in CROSS_USER:
        raise InputError(f"cross_user must be one of {', '.join(CROSS_USER)}, got {cross_user!r}")
    all_pending = tuple([j.id for j in pending])
    if mode == "off":
        return PackingResult((), all_pending)
    hosts, guests = _packable(placed, mode, profile.classes, set(exclude)), _packable(pending, mode, profile.classes)
    table, host_cls, guest_cls, hosts, guests = _classes(profile, hosts, guests)
    host_gpus, guest_gpus = [j.num_gpus for j in hosts], [j.num_gpus for j in guests]
    counts = sorted(set(host_gpus) & set(guest_gpus))
    if not counts:
        return PackingResult((), all_pending)

    try:
        raw_gpu = [gpu_type_of[j.id] for j in hosts]
    except KeyError as e:
        raise InputError(f"placed job {e.args[0]!r} has no GPU type") from None
    lowered = {g: profile._gpu(g) for g in dict.fromkeys(raw_gpu)}
    gpu_names = tuple(dict.fromkeys(lowered.values()))
    # classes are numbered in canonical order: the solvers' tie-breaks do not depend on which job
    # came first nor on which other classes are present
    type_at = [table.gpu_types.index(g) for g in gpu_names]
    values = _edge_values(table, type_at, objective, min_speed, below_one)
    users = {j.user for j in hosts} | {j.user for j in guests} if cross_user == "timeslice" else set()
    owners: _UserClasses | None = None  # set when two users' pairs are scored apart from one user's
    by_user = False  # no two users' pair gains: each user's jobs are a matching problem of their own
    if len(users) > 1:  # two users' pairs time-slice
        sliced = profile.timeslice_classes  # numbered alike, also with the classes this call added
        if table is not profile.classes:
            sliced = sliced.with_extra(profile, table.classes)
        two = _edge_values(sliced, type_at, objective, min_speed, below_one)
        if not two[:, np.unique(host_cls)][:, :, np.unique(guest_cls)].any():
            by_user = True  # the common case: the fallback's pairs all sum below one
        else:
            host_cls, guest_cls, values, owners = _by_user(
                host_cls, guest_cls, [j.user for j in hosts], [j.user for j in guests], values, two)
    gpu_index = {g: gpu_names.index(low) for g, low in lowered.items()}
    host_type = np.fromiter(map(gpu_index.__getitem__, raw_gpu), np.int64, len(hosts))
    host_n, guest_n = np.array(host_gpus, dtype=np.int64), np.array(guest_gpus, dtype=np.int64)
    pairs: list[PackedPair] = []
    for _n, rows, cols in _problems(counts, host_n, guest_n, hosts, guests, by_user):
        for r, c in _match(host_cls[rows], host_type[rows], guest_cls[cols], values, _assignment_limit):
            h, g = int(rows[r]), int(cols[c])
            t, hc, gc = table, int(host_cls[h]), int(guest_cls[g])
            if owners is not None:  # (class, user) numbers: back to classes, and the pair's table
                t = table if owners.host_users[hc] == owners.guest_users[gc] else sliced
                hc, gc = int(owners.host_classes[hc]), int(owners.guest_classes[gc])
            opt = t.options[int(t.option[type_at[host_type[h]], hc, gc])]
            pairs.append(PackedPair(hosts[h].id, guests[g].id, opt.a_speed, opt.b_speed,
                                    opt.a_strategy, opt.b_strategy))
    if not pairs:  # most rounds of big traces
        return PackingResult((), all_pending)
    order = dict(zip(map(_ID, placed), count()))
    pairs.sort(key=lambda p: order[p.placed])
    packed = {p.partner for p in pairs}
    return PackingResult(tuple(pairs), tuple(filterfalse(packed.__contains__, all_pending)))


def _edge_values(table: ClassTable, type_at: Sequence[int], objective: Objective, min_speed: float,
                 below_one: bool) -> np.ndarray:
    """The objective's edge values on the given GPU types, less the edges the floors forbid."""
    values: np.ndarray = (table.gain if objective == "throughput" else table.weight)[type_at]
    if min_speed > 0.0:  # no edge where the pair's slower member falls below the floor
        values = np.where(table.slowest[type_at] >= min_speed, values, 0.0)
    if not below_one:  # NaN (no pair) compares False: no edge either way
        values = np.where(table.total[type_at] >= ONE, values, 0.0)
    return values


@dataclass(frozen=True)
class _UserClasses:
    """The (class, user) numbers of one packing call, placed jobs' and pending jobs' apart: the class
    and the user of each."""

    host_classes: np.ndarray
    host_users: tuple[str, ...]
    guest_classes: np.ndarray
    guest_users: tuple[str, ...]


def _by_user(host_cls: np.ndarray, guest_cls: np.ndarray, host_users: Sequence[str], guest_users: Sequence[str],
             same_user: np.ndarray, two_users: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, _UserClasses]:
    """Number the placed jobs' (class, user) and the pending jobs' in canonical order (class, then
    user name) and give the edge values between them: one user's pairs from ``same_user``, two users'
    from ``two_users`` (both indexed [GPU type, class, class])."""
    def number(cls: np.ndarray, users: Sequence[str]) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
        keys = sorted(set(zip(cls.tolist(), users)))
        at = {k: i for i, k in enumerate(keys)}
        ids = np.fromiter(map(at.__getitem__, zip(cls.tolist(), users)), np.int64, len(users))
        return ids, np.array([c for c, _ in keys], dtype=np.int64), tuple(u for _, u in keys)

    hosts, h_cls, h_users = number(host_cls, host_users)
    guests, g_cls, g_users = number(guest_cls, guest_users)
    same = np.array(h_users, dtype=object)[:, None] == np.array(g_users, dtype=object)[None, :]
    grid = np.ix_(np.arange(same_user.shape[0]), h_cls, g_cls)
    values = np.where(same[None, :, :], same_user[grid], two_users[grid])
    return hosts, guests, values, _UserClasses(h_cls, h_users, g_cls, g_users)


def check_min_speed(min_speed: float) -> None:
    if not 0.0 <= min_speed <= 1.0:
        raise InputError(f"packing min_speed must be in [0, 1] (a normalized speed), got {min_speed!r}")


def _problems(counts: Sequence[int], host_n: np.ndarray, guest_n: np.ndarray, hosts: Sequence[Job],
              guests: Sequence[Job], by_user: bool = False) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """One matching problem per GPU count, and per ``group`` when jobs carry groups (a pair never
    spans two groups), and per user with ``by_user``: (count, placed rows, pending columns)."""
    def group(j: Job) -> str:
        return f"{j.group}\0{j.user}" if by_user else j.group

    groups = {group(j) for j in hosts} | {group(j) for j in guests}
    if len(groups) <= 1:
        return [(n, np.flatnonzero(host_n == n), np.flatnonzero(guest_n == n)) for n in counts]
    code = {g: i for i, g in enumerate(sorted(groups))}
    host_g = np.fromiter(map(code.__getitem__, map(group, hosts)), np.int64, len(hosts))
    guest_g = np.fromiter(map(code.__getitem__, map(group, guests)), np.int64, len(guests))
    out = []
    for n in counts:  # each group's rows and columns, in input order; groups without both make no problem
        rows, cols = np.flatnonzero(host_n == n), np.flatnonzero(guest_n == n)
        rows, cols = rows[np.argsort(host_g[rows], kind="stable")], cols[np.argsort(guest_g[cols], kind="stable")]
        rg, cg = host_g[rows], guest_g[cols]
        both = np.intersect1d(rg, cg)
        r_lo, r_hi = np.searchsorted(rg, both), np.searchsorted(rg, both, side="right")
        c_lo, c_hi = np.searchsorted(cg, both), np.searchsorted(cg, both, side="right")
        out += [(n, rows[a:b], cols[c:d]) for a, b, c, d in zip(r_lo.tolist(), r_hi.tolist(), c_lo.tolist(),
                                                                  c_hi.tolist())]
    return out


def _packable(jobs: Sequence[Job], mode: PackingMode, table: ClassTable, skip: Collection[str] = ()) -> list[Job]:
    """The jobs that may take part in packing, in order: not ``no_pack``, not in ``skip``, in
    ``single`` mode on one GPU, and not on a GPU count that no GPU type measured for them
    (``ClassTable.unmeasured``)."""
    known, unmeasured = table.spelled, table.unmeasured
    if mode == "on" and not skip:
        return [j for j in jobs if not j.no_pack and (j.class_key in known or not unmeasured(j))]
    return [j for j in jobs if not j.no_pack and j.id not in skip and (mode == "on" or j.num_gpus == 1)
            and (j.class_key in known or not unmeasured(j))]


def _classes(profile: ThroughputProfile, hosts: list[Job], guests: list[Job]
             ) -> tuple[ClassTable, np.ndarray, np.ndarray, list[Job], list[Job]]:
    """(table, class numbers of hosts and guests, hosts, guests): jobs spelled otherwise than the
    profile spells them are resolved; those of a key no GPU type measured are left out (they never
    pack); classes the table lacks (a job listing several strategies) are added to a table for
    this call."""
    table = profile.classes
    jobs = [*hosts, *guests]
    keys = [j.class_key for j in jobs]
    found = list(map(table.spelled.get, keys))
    if None in found:
        missed = {i: profile.job_class(jobs[i]) for i, n in enumerate(found) if n is None}
        extra = [c for c in missed.values() if c not in table.number and profile.measured(c.key)]
        if extra:
            table = table.with_extra(profile, extra)
            found = list(map(table.spelled.get, keys))  # renumbered
        for i, cls in missed.items():
            found[i] = table.number.get(cls, -1)
        keep = [n is not None and n >= 0 for n in found]
        hosts, guests = list(compress(hosts, keep[:len(hosts)])), list(compress(guests, keep[len(hosts):]))
        found = list(compress(found, keep))
    numbers = np.array(found, dtype=np.int64)
    return table, numbers[:len(hosts)], numbers[len(hosts):], hosts, guests


_ID = attrgetter("id")


def _match(host_cls: np.ndarray, host_type: np.ndarray, guest_cls: np.ndarray, values: np.ndarray,
           assignment_limit: int | None) -> list[tuple[int, int]]:
    """One matching problem: placed jobs (rows) x pending jobs (columns) of one GPU count;
    ``values[t]``: the objective's edge values (``ClassTable.gain`` or ``weight``) on GPU type t.
    Returns (row, column) positions of the pairs:
    by one job-level assignment in ``pack_match.match``, or, for problems over ``assignment_limit``,
    the transportation LP between groups."""
    status, rows, cols, group_value, group_of_row, class_of_col = pack_match.match(
        host_cls, host_type, guest_cls, values, -1 if assignment_limit is None else assignment_limit)
    if status == pack_match.TRANSPORT:
        return _transport(group_value, group_of_row, class_of_col)
    return list(zip(rows.tolist(), cols.tolist()))


def _transport(group_value: np.ndarray, group_of_row: np.ndarray, class_of_col: np.ndarray) -> list[tuple[int, int]]:
    """The same optimum as a transportation problem between groups (an LP with group x class
    variables whose vertices are integral), for problems too large for a job-level Hungarian.
    The earliest jobs of each group get the partners, as in the job-level path."""
    supply = np.bincount(group_of_row, minlength=group_value.shape[0])
    demand = np.bincount(class_of_col, minlength=group_value.shape[1])
    gi, ci = np.nonzero(group_value > 0.0)
    k = gi.size
    a_ub = coo_matrix((np.ones(2 * k), (np.r_[gi, supply.size + ci], np.r_[np.arange(k), np.arange(k)])),
                      shape=(supply.size + demand.size, k)).tocsr()
    # scipy's milp without integrality is HiGHS' LP with a fraction of linprog's call overhead
    constraint = LinearConstraint(a_ub, -np.inf, np.r_[supply, demand])
    res = milp(-group_value[gi, ci], constraints=constraint, bounds=Bounds(0, np.inf))
    if res.status != 0 or res.x is None:  # pragma: no cover - a bounded feasible LP (x = 0 is feasible)
        raise RuntimeError(f"packing transportation LP failed: {res.message}")
    units = np.rint(res.x).astype(np.int64)
    if np.abs(res.x - units).max() > 1e-6:  # not a vertex (never seen): ask for integers outright
        res = milp(-group_value[gi, ci], constraints=constraint, bounds=Bounds(0, np.inf), integrality=np.ones(k))
        units = np.rint(res.x).astype(np.int64)
    hosts = np.argsort(group_of_row, kind="stable")  # each group's jobs, in input order
    guests = np.argsort(class_of_col, kind="stable")
    next_host = np.r_[0, np.cumsum(supply)[:-1]]
    next_guest = np.r_[0, np.cumsum(demand)[:-1]]
    chosen: list[tuple[int, int]] = []
    for g, c, x in zip(gi.tolist(), ci.tolist(), units.tolist()):
        if x:
            h0, q0 = next_host[g], next_guest[c]
            chosen += zip(hosts[h0:h0 + x].tolist(), guests[q0:q0 + x].tolist())
            next_host[g] += x
            next_guest[c] += x
    return chosen
