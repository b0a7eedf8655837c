"""One world per test for the round's steps: a real state database in tmp_path and an in-memory Slurm
(``tests/daemon/fake_slurm.py``) with two nodes of 4 A100s."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from tesserae_slurm.daemon.round.stop_start import Applier
from tesserae_slurm.daemon.round.guard import Guard
from tesserae_slurm.daemon.state.journal import Journal
from tesserae_slurm.daemon.state.store import Store
from tesserae_slurm.site.config import SiteConfig
from tesserae_slurm.site.load import config_from_mapping

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


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path)
