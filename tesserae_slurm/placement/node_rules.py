"""Operators' node rules (`tesserae pin` and `keep-off`) in all three stages of the engine.

A rule becomes a row of a small (rules x cluster nodes) mask, once a round (``rule_masks``):
placement walks a job over its row's nodes only (``consolidate``), packing puts a pending job only
on a placed job all of whose nodes its rule allows (``pack_by_rule``), and migration relabels a node
only onto one that every rule treats alike (``rule_types``), so a rule that held in the logical plan
holds in the physical one (docs/daemon.md, "Operators' actions").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import compress
from operator import attrgetter
from typing import NamedTuple

import numpy as np

from ..model import Cluster, Job, PackedPair, Placement
from ..profiles import ThroughputProfile
from .pack import CrossUser, Objective, PackingMode, pack

_ID_OF = attrgetter("id")  # of a Job


@dataclass(frozen=True)
class NodeRule:
    """An operator's rule for one job: placed only on ``nodes`` (pin), or never on them (``keep_off``).

    Placement walks the job over its allowed nodes only, packing puts it only on a job whose nodes
    are all allowed, and migration relabels a node only onto one that every rule treats alike, so
    the rule holds after relabeling too (a running job that breaks it is moved).
    """

    nodes: frozenset[str]
    keep_off: bool = False
    text: str = ""  # the rule in words, for the pending reason ("pinned to node[1-2] by alice")


class NodeRules(NamedTuple):
    """Operators' node rules of one round, per unit: ``rule[k]`` is a row of ``allowed`` (-1: none), a
    (rules x cluster nodes) mask of the nodes the unit may use; ``text[r]`` says rule ``r`` in words."""

    rule: np.ndarray
    allowed: np.ndarray
    text: tuple[str, ...]


def rule_masks(jobs: Sequence[Job], rules: Mapping[str, NodeRule], cluster: Cluster) -> NodeRules:
    """The round's node rules as masks over the cluster's nodes, one row per distinct rule, and each
    active job's row (-1: none), in the order of ``jobs``."""
    names = np.array(cluster.shape[0], dtype=object)
    rows: dict[bytes, int] = {}
    masks: list[np.ndarray] = []
    texts: list[str] = []
    rule = np.full(len(jobs), -1, dtype=np.int64)
    index = {name: i for i, name in enumerate(names.tolist())}
    for k, j in enumerate(jobs):
        r = rules.get(j.id)
        if r is None:
            continue
        mask = np.full(len(names), r.keep_off)
        mask[[index[n] for n in r.nodes if n in index]] = not r.keep_off
        key = mask.tobytes() + r.text.encode()
        if key not in rows:
            rows[key] = len(masks)
            masks.append(mask)
            texts.append(r.text or ("kept off " if r.keep_off else "pinned to ") + ",".join(sorted(r.nodes)))
        rule[k] = rows[key]
    allowed = np.array(masks, dtype=np.bool_).reshape(len(masks), len(names))
    return NodeRules(rule, allowed if len(masks) else np.zeros((1, len(names)), dtype=np.bool_), tuple(texts))


def rules_of(rules: NodeRules, jobs: Sequence[Job], ids: Sequence[str]) -> NodeRules:
    """The rules of a subset of the round's jobs (the walk without the jobs over a GPU limit)."""
    at = dict(zip(ids, range(len(ids))))
    return rules._replace(rule=rules.rule[[at[j.id] for j in jobs]])


def unit_rules(rules: NodeRules, units: Sequence[Sequence[Job]], ids: Sequence[str]) -> NodeRules:
    """Per-unit rules (``units``: the jobs of each unit): a policy pair may use only the nodes both
    its jobs may use."""
    row = dict(zip(ids, rules.rule.tolist()))
    allowed, texts = list(rules.allowed), list(rules.text)
    out = np.full(len(units), -1, dtype=np.int64)
    for k, u in enumerate(units):
        rs = sorted({row[j.id] for j in u} - {-1})
        if len(rs) == 1:
            out[k] = rs[0]
        elif rs:
            out[k] = len(allowed)
            allowed.append(np.logical_and.reduce([rules.allowed[r] for r in rs]))
            texts.append("; ".join(rules.text[r] for r in rs))
    return NodeRules(out, np.array(allowed, dtype=np.bool_), tuple(texts))


def pack_by_rule(placed: Sequence[Job], waiting: Sequence[Job], profile: ThroughputProfile,
                 gpu_type_of: Mapping[str, str], rules: NodeRules, ids: Sequence[str], plan: Placement,
                 cluster: Cluster, *, mode: PackingMode, objective: Objective,
                 min_speed: float, cross_user: CrossUser = "timeslice", below_one: bool = False
                 ) -> tuple[PackedPair, ...]:
    """Packing when some pending jobs have node rules. Rules that allow the same placed jobs (all of
    whose nodes they allow) are one matching problem, the most restrictive first; the jobs without a
    rule, and those whose rule allows every placed job, go last onto the placed jobs still alone."""
    def run(hosts: Sequence[Job], guests: Sequence[Job], taken: set[str]) -> tuple[PackedPair, ...]:
        return pack(hosts, guests, profile, gpu_type_of, mode=mode, objective=objective, exclude=taken,
                    min_speed=min_speed, cross_user=cross_user, below_one=below_one).pairs

    row = dict(zip(ids, rules.rule.tolist()))
    guest_rule = np.fromiter(map(row.__getitem__, map(_ID_OF, waiting)), np.int64, len(waiting))
    used = sorted(set(guest_rule.tolist()) - {-1})
    if not used or not placed:
        return run(placed, waiting, set())
    index = {name: i for i, name in enumerate(cluster.shape[0])}
    refs = plan.job_gpus()
    member = np.zeros((len(placed), len(index)), dtype=np.int64)  # placed job x node it uses
    for k, h in enumerate(placed):
        member[k, [index[node] for node, _ in refs[h.id]]] = 1
    ok = (member @ (~rules.allowed[used]).T.astype(np.int64)) == 0  # placed job x rule: all its nodes allowed
    problems: dict[bytes, list[int]] = {}
    last = guest_rule < 0
    for col, r in enumerate(used):
        if ok[:, col].all():
            last |= guest_rule == r
        else:
            problems.setdefault(ok[:, col].tobytes(), []).append(col)
    host_n = np.fromiter([h.num_gpus for h in placed], np.int64, len(placed))
    guest_n = np.fromiter([g.num_gpus for g in waiting], np.int64, len(waiting))
    col_of = np.full(max(used) + 2, -1, dtype=np.int64)  # rule -> column of ok (-1 at rule -1: none)
    col_of[used] = np.arange(len(used))
    guest_col = col_of[guest_rule]
    free = np.ones(len(placed), dtype=np.bool_)  # placed jobs without a partner yet
    pairs: list[PackedPair] = []
    taken: set[str] = set()
    for cols in sorted(problems.values(), key=lambda cs: int(ok[:, cs[0]].sum())):
        gs = np.flatnonzero(np.isin(guest_col, cols)).tolist()
        hs = np.flatnonzero(ok[:, cols[0]] & free & np.isin(host_n, guest_n[gs])).tolist()
        if not hs:  # most rules of a busy round: no partner of the right size left where they may go
            continue
        found = run([placed[k] for k in hs], [waiting[k] for k in gs], set())
        pairs.extend(found)
        taken.update(p.placed for p in found)
        free[[k for k in hs if placed[k].id in taken]] = False
    pairs.extend(run(placed, list(compress(waiting, last.tolist())), taken))
    order = {j.id: k for k, j in enumerate(placed)}
    return tuple(sorted(pairs, key=lambda p: order[p.placed]))


def rule_types(node_type: Mapping[str, str], names: Sequence[str], rules: NodeRules, ids: Sequence[str],
                plan: Placement) -> dict[str, str]:
    """Node types for migration, each with the node's membership in every rule a placed job carries:
    migration relabels a node only onto a node of the same type, so a rule that held in the logical
    plan holds in the physical one."""
    present = plan.jobs()
    used = sorted({r for j, r in zip(ids, rules.rule.tolist()) if r >= 0 and j in present})
    if not used:
        return dict(node_type)
    bits = rules.allowed[used].T.astype(np.uint8)  # node (cluster order) x used rule
    return {name: f"{node_type[name]}|{bits[i].tobytes().hex()}" for i, name in enumerate(names)}
