"""Compiled core of ``pack``'s matching for one GPU count (numba).

Every engine call solves one matching per GPU count over a few hundred jobs (groups of
interchangeable jobs, ranks within groups, the job-level matrix, the earliest jobs of each group);
as loops compiled once that is one call rather than a dozen numpy and scipy calls each paying its
overhead. Problems too large for a job-level assignment go to the transportation LP in Python.
"""

from __future__ import annotations

import numpy as np

from ..jit import jit as _jit
from .lsap import lsap_max

__all__ = ["match"]

NONE, PAIRS, TRANSPORT = 0, 1, 2  # what ``match`` found: no pair, pairs, a problem for the LP


@_jit
def match(host_cls, host_type, guest_cls, values, limit):  # pragma: no cover - compiled
    """``pack._match`` up to the solver: returns (status, chosen rows, chosen columns,
    group values, group of each row, class of each column); with ``TRANSPORT`` the caller solves
    the LP on the last three. ``limit`` < 0: no limit on the job-level matrix."""
    types = values.shape[0]
    ng = guest_cls.shape[0]
    row_group = host_cls * types + host_type
    groups = np.unique(row_group)
    classes = np.unique(guest_cls)
    n_groups, n_classes = groups.shape[0], classes.shape[0]
    group_value = np.empty((n_groups, n_classes))
    positive = False
    for a in range(n_groups):
        t, h = groups[a] % types, groups[a] // types
        for b in range(n_classes):
            x = values[t, h, classes[b]]
            group_value[a, b] = x
            if x > 0.0:
                positive = True
    group_of_row = np.searchsorted(groups, row_group)
    class_of_col = np.searchsorted(classes, guest_cls)
    none = np.empty(0, np.int64)
    if not positive:
        return NONE, none, none, group_value, group_of_row, class_of_col
    # at most min(rows, columns) jobs get a partner: the earliest that many of each group matter
    rows = _earliest_of_groups(group_of_row, n_groups, ng)
    cols = _earliest_of_groups(class_of_col, n_classes, rows.shape[0])
    if limit >= 0 and rows.shape[0] * cols.shape[0] > limit:
        return TRANSPORT, none, none, group_value, group_of_row, class_of_col
    value = np.empty((rows.shape[0], cols.shape[0]))
    edge = False
    for a in range(rows.shape[0]):
        for b in range(cols.shape[0]):
            x = group_value[group_of_row[rows[a]], class_of_col[cols[b]]]
            value[a, b] = x
            if x > 0.0:
                edge = True
    if not edge:
        return NONE, none, none, group_value, group_of_row, class_of_col
    r, c = lsap_max(value)
    kept = 0
    for k in range(r.shape[0]):
        if value[r[k], c[k]] > 0.0:
            kept += 1
    chosen_r = np.empty(kept, np.int64)
    chosen_c = np.empty(kept, np.int64)
    kept = 0
    for k in range(r.shape[0]):
        if value[r[k], c[k]] > 0.0:
            chosen_r[kept] = rows[r[k]]
            chosen_c[kept] = cols[c[k]]
            kept += 1
    return (PAIRS, _earliest(chosen_r, group_of_row, n_groups), _earliest(chosen_c, class_of_col, n_classes),
            group_value, group_of_row, class_of_col)


@_jit
def _earliest_of_groups(group, n_groups, cap):  # pragma: no cover - compiled
    """Indices whose position among their group's members (input order) is below ``cap``."""
    seen = np.zeros(n_groups, np.int64)
    out = np.empty(group.shape[0], np.int64)
    n = 0
    for i in range(group.shape[0]):
        if seen[group[i]] < cap:
            out[n] = i
            n += 1
        seen[group[i]] += 1
    return out[:n]


@_jit
def _earliest(chosen, group, n_groups):  # pragma: no cover - compiled
    """``pack._earliest``: the k-th smallest chosen index of a group becomes the group's k-th member
    in input order (jobs of one group are interchangeable; partners go to the earliest)."""
    count = np.zeros(n_groups + 1, np.int64)
    for i in range(group.shape[0]):
        count[group[i] + 1] += 1
    start = np.cumsum(count)
    members = np.empty(group.shape[0], np.int64)
    fill = start[:-1].copy()
    for i in range(group.shape[0]):
        members[fill[group[i]]] = i
        fill[group[i]] += 1
    out = np.empty(chosen.shape[0], np.int64)
    for p in range(chosen.shape[0]):
        g = group[chosen[p]]
        k = 0
        for q in range(chosen.shape[0]):
            if group[chosen[q]] == g and chosen[q] < chosen[p]:
                k += 1
        out[p] = members[start[g] + k]
    return out
