"""Users cannot start managed jobs themselves: the daemon's holds are administrator holds.

Slurm lets a job's owner release a user hold (tsbatch's ``--hold``, a requeue-hold), and a released
job starts at once with every GPU of its node visible. The daemon therefore turns each managed job's
user hold into an administrator's hold (``scontrol hold`` by root or an operator: JobHeldAdmin, which
only an operator can release) as soon as it sees it, and requeue-holds a managed job that runs
without its assignment (reconcile's ``evict``), between rounds as well as in them (``guard_seconds``).

An administrator's own hold is also JobHeldAdmin, so Slurm's reason alone cannot say whose hold it
is. The store keeps the ids of the jobs the daemon holds itself; each is written before its
``scontrol hold`` and dropped once Slurm no longer shows the job admin-held (started, released,
finished), so a later hold by an administrator is recognised as theirs and respected.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from ..state.store import Store
from .observe import ManagedJob

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
