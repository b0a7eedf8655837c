"""Small worlds of managed jobs for the round's unit tests: Slurm's view (the fake's) and the rows."""

from __future__ import annotations

from tesserae_slurm.daemon.operators import admin
from tesserae_slurm.daemon.round.inputs import InputBuilder, RoundInputs
from tesserae_slurm.daemon.round.observe import Snapshot, build_snapshot
from tesserae_slurm.daemon.round.reconcile import reconcile
from tesserae_slurm.site.partition import scheduling_profile
from tesserae_slurm.slurm import SlurmJob

from .conftest import World


def look(world: World, now: float = 1000.0) -> Snapshot:
    return build_snapshot(now, tuple(world.slurm.jobs.values()), world.slurm.nodes, world.cfg)


def inputs_of(world: World, *jobs: SlurmJob, dry_run: bool = False) -> tuple[Snapshot, RoundInputs]:
    """Slurm shows ``jobs``; the rows are what reconciliation makes of them; then the round's inputs."""
    world.slurm.jobs.update({str(j.job_id): j for j in jobs})
    snap = look(world)
    reconcile(world.journal, snap, set(), world.cfg.slurm.start_timeout_s, None)
    return snap, InputBuilder(world.journal).build(snap, world.cfg, scheduling_profile(world.cfg.scheduler.profile),
                                                   admin.standing(world.store), dry_run)
