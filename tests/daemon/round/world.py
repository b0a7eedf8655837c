"""A world for the round's unit tests: a real state database in tmp_path and an in-memory Slurm
(``tests/daemon/fake_slurm.py``) with two nodes of 4 A100s; and small steps that bring it to a round."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from tesserae_slurm.daemon.operators import admin
from tesserae_slurm.daemon.round.guard import Guard
from tesserae_slurm.daemon.round.inputs import InputBuilder, RoundInputs
from tesserae_slurm.daemon.round.observe import Snapshot, build_snapshot
from tesserae_slurm.daemon.round.reconcile import reconcile
from tesserae_slurm.daemon.round.stop_start import Applier
from tesserae_slurm.daemon.state.journal import Journal
from tesserae_slurm.daemon.state.store import Store
from tesserae_slurm.site.config import SiteConfig
from tesserae_slurm.site.load import config_from_mapping
from tesserae_slurm.site.partition import scheduling_profile
from tesserae_slurm.slurm import SlurmJob

from ..fake_slurm import FakeSlurm, node


@dataclass
class World:
    cfg: SiteConfig
    slurm: FakeSlurm
    journal: Journal
    stop: threading.Event

    @property
    def store(self) -> Store:
        return self.journal.store

    def applier(self) -> Applier:
        """On the wall clock: it waits out the (short) grace period and the requeue's settling for real."""
        return Applier(self.slurm, self.journal, self.cfg, self.stop, sleep=lambda _s: None, poll_s=0.001)

    def guard(self) -> Guard:
        return Guard(self.slurm, self.journal, self.clock)

    def clock(self) -> float:
        return float(self.slurm.now)

    def begin_round(self) -> int:
        return self.journal.begin_round(self.clock(), self.cfg.scheduler.policy, False)


def make_world(tmp_path: Path, **sections: object) -> World:
    raw = {"scheduler": {"policy": "fifo"}, "preemption": {"grace_seconds": 0.05},
           "state": {"database": str(tmp_path / "state.db")}, "metrics": {"listen": ""}, "http": {"listen": ""},
           "admin": {"requests_dir": str(tmp_path / "requests")}, **sections}
    cfg = config_from_mapping(raw, str(tmp_path / "tesserae.yaml"))
    slurm = FakeSlurm(nodes=(node("node1"), node("node2")))
    return World(cfg, slurm, Journal(Store.open(cfg.state.database)), threading.Event())


def look(world: World, now: float = 1000.0) -> Snapshot:
    return build_snapshot(now, tuple(world.slurm.jobs.values()), world.slurm.nodes, world.cfg)


def inputs_of(world: World, *jobs: SlurmJob, dry_run: bool = False) -> tuple[Snapshot, RoundInputs]:
    """Slurm shows ``jobs``; the rows are what reconciliation makes of them; then the round's inputs."""
    world.slurm.jobs.update({str(j.job_id): j for j in jobs})
    snap = look(world)
    reconcile(world.journal, snap, set(), world.cfg.slurm.start_timeout_s, None)
    return snap, InputBuilder(world.journal).build(snap, world.cfg, scheduling_profile(world.cfg.scheduler.profile),
                                                   admin.standing(world.store), dry_run)
