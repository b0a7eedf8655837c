"""Gavel's round mechanism (scheduler.py; policies.md §7): from an allocation X to this round's jobs.

Each combination (a job alone, or a packed pair) keeps, per GPU type, the time it has run since the
last *allocation reset*; a GPU type's total is the sum over combinations. Its priority is
``X / (its time / the total)``: combinations that got less than their share go first (a zero
fraction gives ``X * 1e9``; X = 0 gives 0). Ties are broken by the deficit (time owed before the
last reset), then by X.

Reset (and only then a new X): when jobs arrived or left since the last one **and** at least
``reset_interval_s`` (Gavel: 1920 s) passed since it, or on the first round. At a reset every
combination's time restarts at half a round, the deficit grows by ``X_old * elapsed - (time - round/2)``.
A job that arrives between resets has no X, so priority 0, until the next reset. Run time is
counted once per combination (not x GPUs), as the shell reports it: the growth of each job's
``executed_time`` since last round; a pair's time is the longer of its two jobs'.

Selection (``_schedule_jobs_on_workers_helper``): per GPU type (fastest first), combinations sorted
by (priority, deficit, X) descending; walk them, skipping one whose job (or partner) is already
chosen, that cannot run on the type, or that needs more GPUs than are left (then keep walking).
Pairs are considered only on types where the LP gave them time. Everything here is pure; the
state is an immutable ``RoundState`` the policy carries from round to round.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from ..model import JobView

Entry = tuple[str, ...]  # (job,) or (a, b) with a < b
PerType = tuple[float, ...]  # one value per GPU type, in the state's ``gpu_types`` order
NO_FRACTION_PRIORITY = 1e9  # Gavel's stand-in for "never ran since the reset"


def _frozen(d: Mapping) -> Mapping:
    return MappingProxyType(dict(d))


@dataclass(frozen=True)
class RoundState:
    gpu_types: tuple[str, ...] = ()
    allocation: Mapping[Entry, PerType] = field(default_factory=lambda: MappingProxyType({}))
    job_time: Mapping[Entry, PerType] = field(default_factory=lambda: MappingProxyType({}))
    worker_time: PerType = ()
    deficits: Mapping[Entry, PerType] = field(default_factory=lambda: MappingProxyType({}))
    last_reset: float | None = None
    dirty: bool = False  # jobs arrived or left since the allocation was computed
    executed: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    scheduled: tuple[tuple[Entry, int], ...] = ()  # (combination, GPU type index) chosen last round
    resets: int = 0


def _add(v: PerType, w: int, dt: float) -> PerType:
    return tuple(x + dt if i == w else x for i, x in enumerate(v))


def _home_type(x: PerType | None) -> int:
    """GPU type a job most likely ran on when the policy did not choose it (its largest X)."""
    if not x:
        return 0
    return max(range(len(x)), key=lambda i: (x[i], -i))


def observe(state: RoundState, jobs: Sequence[JobView], gpu_types: tuple[str, ...], round_s: float) -> RoundState:
    """Account last round's run times, drop departed jobs' combinations, add arrivals (time = round/2)."""
    if state.gpu_types != gpu_types:  # first round, or the cluster's GPU types changed: start over
        state = RoundState(gpu_types=gpu_types, worker_time=(0.0,) * len(gpu_types),
                           executed=state.executed, resets=state.resets)
    nw, half = len(gpu_types), round_s / 2.0
    present = {v.id for v in jobs}
    ran = {v.id: max(0.0, v.executed_time - state.executed[v.id]) for v in jobs if v.id in state.executed}
    job_time = dict(state.job_time)
    worker = list(state.worker_time)
    covered: set[str] = set()
    for entry, w in state.scheduled:
        covered.update(entry)
        if entry in job_time and all(m in present for m in entry):
            dt = max(ran.get(m, 0.0) for m in entry)
            if dt > 0:
                job_time[entry] = _add(job_time[entry], w, dt)
                worker[w] += dt
    for jid, dt in ran.items():  # ran although not chosen (the engine backfilled or packed it)
        if dt > 0 and jid not in covered and (jid,) in job_time:
            w = _home_type(state.allocation.get((jid,)))
            job_time[(jid,)] = _add(job_time[(jid,)], w, dt)
            worker[w] += dt
    alive = lambda e: all(m in present for m in e)  # noqa: E731
    departed = any(not alive(e) for e in job_time)
    job_time = {e: t for e, t in job_time.items() if alive(e)}
    arrived = [v.id for v in jobs if (v.id,) not in job_time]
    for jid in arrived:
        job_time[(jid,)] = (half,) * nw
    return replace(
        state,
        allocation=_frozen({e: x for e, x in state.allocation.items() if alive(e)}),
        job_time=_frozen(job_time),
        worker_time=tuple(worker),
        deficits=_frozen({e: d for e, d in state.deficits.items() if alive(e)}),
        dirty=state.dirty or departed or bool(arrived),
        executed=_frozen({v.id: v.executed_time for v in jobs}),
    )


def needs_reset(state: RoundState, now: float, interval_s: float) -> bool:
    return state.dirty and (state.last_reset is None or now - state.last_reset >= interval_s)


def reset(state: RoundState, now: float, round_s: float, allocation: Mapping[Entry, PerType],
          job_ids: Sequence[str]) -> RoundState:
    """Settle deficits under the old X, install the new X, restart every combination's time."""
    nw, half = len(state.gpu_types), round_s / 2.0
    zero = (0.0,) * nw
    elapsed = 0.0 if state.last_reset is None else now - state.last_reset
    owed: dict[Entry, PerType] = {}
    for e, times in state.job_time.items():
        old, d = state.allocation.get(e, zero), state.deficits.get(e, zero)
        owed[e] = tuple(d[w] + old[w] * elapsed - (times[w] - half) for w in range(nw))
    entries = [(j,) for j in job_ids] + [e for e in allocation if len(e) == 2]
    return replace(
        state,
        allocation=_frozen(allocation),
        job_time=_frozen({e: (half,) * nw for e in entries}),
        worker_time=(half * len(entries),) * nw,
        deficits=_frozen({e: owed.get(e, zero) for e in entries}),
        last_reset=now,
        dirty=False,
        resets=state.resets + 1,
    )


def priorities(state: RoundState) -> dict[Entry, PerType]:
    """Priority per combination and GPU type: X / (time since reset / type total)."""
    out: dict[Entry, PerType] = {}
    nw = len(state.gpu_types)
    for e, times in state.job_time.items():
        x = state.allocation.get(e)
        row = []
        for w in range(nw):
            if x is None or x[w] <= 0.0:
                row.append(0.0)
                continue
            frac = times[w] / state.worker_time[w] if state.worker_time[w] > 0 else 0.0
            row.append(x[w] / frac if frac > 0 else x[w] * NO_FRACTION_PRIORITY)
        out[e] = tuple(row)
    return out


def select(state: RoundState, prios: Mapping[Entry, PerType], gpus_of: Mapping[str, int],
           capacity: Sequence[int], type_order: Sequence[int],
           can_run: Callable[[str, int], bool]) -> list[tuple[Entry, int]]:
    """Gavel's greedy pass: the combinations (and GPU types) to run this round, in the order chosen."""
    zero = (0.0,) * len(state.gpu_types)
    queue: list[tuple[Entry, int]] = []
    for w in type_order:
        rows = []
        for e, p in prios.items():
            x = state.allocation.get(e, zero)
            if len(e) == 2 and x[w] <= 0.0:
                continue
            rows.append(((p[w], state.deficits.get(e, zero)[w], x[w]), e))
        rows.sort(key=lambda r: r[0], reverse=True)  # stable: ties keep entry order
        queue.extend((e, w) for _, e in rows)
    left = list(capacity)
    chosen: set[str] = set()
    out: list[tuple[Entry, int]] = []
    for e, w in queue:
        if left[w] == 0 or any(m in chosen for m in e):
            continue
        if len(e) == 1 and not can_run(e[0], w):
            continue
        s = gpus_of[e[0]]
        if s > left[w]:
            continue
        left[w] -= s
        chosen.update(e)
        out.append((e, w))
    return out
