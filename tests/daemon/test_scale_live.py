"""A miniature of `tesserae bench daemon-scale --world devcluster` (bench/daemon_scale.py): 16 slurmd with
emulated GPUs, 500 held jobs sleeping, three rounds of the real daemon. Not timing (that is the bench):
nothing is lost or started twice, the database agrees with Slurm, and the Slurm calls are batched: one
release and one hold for the whole round, one `scontrol update` per started job, one signal and one
requeue-hold for the round's stops, nothing else."""

from __future__ import annotations

from collections import Counter

import pytest

from tesserae_slurm.bench.daemon_scale import run_devcluster
from tesserae_slurm.daemon.state.store import Store
from tesserae_slurm.devcluster import DevCluster
from tesserae_slurm.devcluster.install import ensure_slurm_installed

from .helpers import Env, consistency_problems

pytestmark = pytest.mark.slurm_live

NODES, JOBS, ROUNDS = 16, 500, 3


def test_a_miniature_scale_run_loses_nothing_starts_nothing_twice_and_batches_its_calls(tmp_path) -> None:
    ensure_slurm_installed()
    cluster = DevCluster(tmp_path / "cluster", nodes=NODES, gpus_per_node=4, start_timeout_s=120)
    cluster.up()
    try:
        # payloads outlast the run: every start is the daemon's, none a restart after an ending
        report, ids = run_devcluster(tmp_path, NODES, JOBS, ROUNDS, pause_s=2.0, payload_s=(600, 900),
                                     cluster=cluster)
        env = Env(cluster, tmp_path)  # the tests' own view of Slurm and the state database
        jobs = [str(j) for j in ids]
        assert len(set(jobs)) == JOBS
        assert consistency_problems(env, jobs) == []
        slurm = env.squeue()
        store = Store.open(tmp_path / "state.db", read_only=True)
        rows = {r.job_id: r for r in store.jobs()}
        assert set(jobs) <= set(rows)
        running = {j for j in jobs if slurm[j]["state"] == "RUNNING"}
        assert running and running == {j for j in jobs if rows[j].state == "RUNNING"}
        started = Counter(a.job_id for a in store.actions() if a.kind == "start" and a.status == "done")
        assert set(started) == running and max(started.values()) == 1  # each started once, and only those
        assert all(slurm[j]["restarts"] in (0, "0") for j in jobs)
        gpus = sum(rows[j].num_gpus for j in running if not rows[j].packed_with or rows[j].packed_with > j)
        assert gpus <= NODES * 4

        assert [s.status for s in report.samples] == ["applied"] * ROUNDS
        for s in report.samples:
            starts = sum(1 for a in store.actions(s.round_id) if a.kind == "start")
            assert s.calls.get("scontrol release", 0) == (1 if starts else 0), s.calls
            assert s.calls.get("scontrol update", 0) == starts, s.calls  # the assignment rides on the place
            assert s.calls.get("scontrol hold", 0) <= 1, s.calls  # the queue's jobs, secured in one call
            # at most one call per changed job, plus the release; a round's stops are one signal and one
            # requeue-hold for all of them (two of each where the guard finishes stops carried over first)
            stops = sum(1 for a in store.actions(s.round_id) if a.kind in ("preempt", "migrate", "requeue"))
            for verb in ("scancel", "scontrol requeuehold"):
                assert s.calls.get(verb, 0) <= min(stops, 2), s.calls
            assert s.writes <= s.changed + 1 + min(stops, 1), s.calls
        first = report.samples[0]
        assert first.calls.get("scontrol hold") == 1 and first.changed == JOBS  # the whole queue held at once
    finally:
        cluster.down()
