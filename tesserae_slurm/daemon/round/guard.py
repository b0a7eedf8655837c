"""Guard: users cannot start managed jobs themselves, so the daemon's holds are administrator holds.

A job's owner may release a user hold (tsbatch's ``--hold``, a requeue-hold), and a released job
starts at once with every GPU of its node visible. So each managed job's user hold becomes an
administrator's (JobHeldAdmin, which only an operator can release) as soon as the daemon sees it, and
a managed job running without its assignment is requeue-held at once: in every round, after
reconcile, and every ``slurm.guard_seconds`` between rounds. An administrator's own hold looks the
same in Slurm, so the store keeps the ids of the jobs the daemon holds itself, and drops each once
Slurm no longer shows it admin-held. docs/daemon.md, "Users cannot bypass the daemon".
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping

from ...slurm import SlurmBackend, SlurmError
from ..state.journal import Intent, Journal
from ..state.store import PENDING, JobUpdate, Store
from .observe import ManagedJob, Snapshot
from .reconcile import Followups
from .stop_start import Applier, ApplyResult

HOLDS_KEY = "daemon_admin_holds"


def load_holds(store: Store) -> set[str]:
    raw = store.get_kv(HOLDS_KEY)
    return set(json.loads(raw)) if raw else set()


def save_holds(store: Store, ids: Iterable[str]) -> None:
    store.set_kv(HOLDS_KEY, json.dumps(sorted(set(ids), key=lambda j: j.zfill(12))).encode())


def still_held(holds: set[str], jobs: Mapping[str, ManagedJob]) -> set[str]:
    """The daemon's holds that Slurm still shows: a job not admin-held now is no longer the daemon's."""
    return {j for j in holds if j in jobs and jobs[j].slurm.admin_held}


def to_secure(jobs: Mapping[str, ManagedJob], skip: Iterable[str] = ()) -> list[str]:
    """Managed jobs whose owner could release them: held by a user hold (not an administrator's)."""
    skip = set(skip)
    return sorted((j for j, mj in jobs.items() if j not in skip and mj.slurm.held and not mj.slurm.admin_held),
                  key=lambda j: j.zfill(12))


class Guard:
    def __init__(self, backend: SlurmBackend, journal: Journal, clock: Callable[[], float] = time.time) -> None:
        self.backend, self.journal, self.clock = backend, journal, clock

    def own_holds(self, snap: Snapshot) -> set[str]:
        """The jobs the daemon itself holds as an administrator, as far as Slurm still shows them."""
        store = self.journal.store
        holds = load_holds(store)
        kept = still_held(holds, snap.jobs)
        if kept != holds:
            save_holds(store, kept)
        return kept

    def enforce(self, round_id: int, snap: Snapshot, followups: Followups, applier: Applier) -> str:
        """Carry out reconciliation's followups in the round: evict, hold, secure, finish the preemptions;
        returns what failed ("" when all went through): the round must not decide on a half-fixed state."""
        fixed = ApplyResult()
        self.secure(round_id, snap, followups, fixed)
        applier.stop_jobs(round_id, followups.requeue, {j: m.slurm for j, m in snap.jobs.items()}, fixed)
        return "; ".join(f"job {j}: {e}" for j, e in sorted(fixed.failed.items()))

    def secure(self, round_id: int | None, snap: Snapshot, followups: Followups, result: ApplyResult) -> None:
        """Evict hand-started jobs, hold hand-released ones, and turn user holds into administrator holds."""
        self.evict(round_id, followups.evict, result)
        self.hold(round_id, followups.hold, "hold", result)
        self.hold(round_id, to_secure(snap.jobs, skip=[*followups.hold, *followups.evict]), "secure", ApplyResult())

    def hold(self, round_id: int | None, ids: list[str], kind: str, result: ApplyResult) -> None:
        """Hold jobs so that only an operator can release them; recorded as the daemon's before the call."""
        if not ids:
            return
        store = self.journal.store
        save_holds(store, load_holds(store) | set(ids))
        intents = [Intent(kind, j, {}) for j in ids]
        actions = self.journal.record_intents(round_id, intents, self.clock()) if round_id is not None else []
        try:
            self.backend.admin_hold([int(j) for j in ids])
            status, error = "done", ""
        except SlurmError as exc:  # e.g. one of them started or finished meanwhile: the next look decides
            status, error = "failed", str(exc)
            result.failed.update({j: error for j in ids})
        self.journal.finish_actions(actions, status, self.clock(), error)

    def evict(self, round_id: int | None, ids: list[str], result: ApplyResult) -> None:
        """Requeue-hold jobs that run without the daemon's assignment, at once (no grace: it never placed them)."""
        if not ids:
            return
        intents = [Intent("evict", j, {}, JobUpdate(state=PENDING)) for j in ids]
        actions = dict(zip(ids, self.journal.record_intents(round_id, intents, self.clock()))) \
            if round_id is not None else {}
        stopped: list[str] = []
        for j in ids:
            try:
                self.backend.evict(int(j))
                stopped.append(j)
                status, error = "done", ""
            except SlurmError as exc:
                status, error = "failed", str(exc)
                result.failed[j] = error
            if j in actions:
                self.journal.finish_action(actions[j], status, self.clock(), error)
        self.hold(round_id, stopped, "hold", ApplyResult())  # may race the requeue: the next look retries
