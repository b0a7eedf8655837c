"""The overheads of a real run in the simulator (sim/overheads.py), on miniatures computed by hand.

One GPU (1x1:a100), rounds of 360 s, ResNet-50 at speed 1.0 alone, fifo, restart cost 0 except where said.

Launch and starts between rounds: job a (500 s) arrives at 0, job b (300 s) at 100.
  bare round model:  a runs 0-500; b waits for the round at 720 and runs 720-1020.
  launch 10 s:       a starts computing at 10, ends at 510; b starts at 730, ends at 1030.
  launch 10 s, between rounds 5 s: a ends at 510; the GPU is free from 510 and b, submitted at 100,
                     starts between rounds at 515: it ends at 815 (its round at 720 credits 205 s).
A job's service counts from its start: b, started between rounds, counts 300 s in its round at 720, not
95; a job delayed 10 s into a round counts 350 s of it.
"""

from __future__ import annotations

import pytest

from tesserae_slurm.model import Cluster, InputError, PackedPair, Placement, RoundDecision
from tesserae_slurm.presets import get_config
from tesserae_slurm.profiles import load_profile
from tesserae_slurm.profiles.speeds import SpeedModel
from tesserae_slurm.sim.jobstate import JobColumns, LiveJob
from tesserae_slurm.sim.overheads import REAL_DAEMON, REAL_PLAIN, Overheads, free_after
from tesserae_slurm.sim.restart import RestartCost
from tesserae_slurm.sim.rounds import job_of, run_round, view_of
from tesserae_slurm.sim.runner import simulate
from tesserae_slurm.sim.traces.record import TraceJob

A100 = load_profile("a100")
ONE = Cluster.from_spec("1x1:a100")
TRACE = [TraceJob("a", 0.0, 1, 500.0, "ResNet-50", "64"), TraceJob("b", 100.0, 1, 300.0, "ResNet-50", "64")]


def _ends(overheads: Overheads | None) -> dict[str, float]:
    res = simulate(TRACE, ONE, get_config("fifo"), A100, restart=RestartCost.uniform(0.0), overheads=overheads)
    return {j.job_id: j.finish_time for j in res.jobs}


def test_bare_round_model_unchanged_by_zero_overheads():
    assert _ends(None) == pytest.approx({"a": 500.0, "b": 1020.0})
    assert _ends(Overheads()) == _ends(None)


def test_launch_delays_every_start():
    assert _ends(Overheads(launch_s=10.0)) == pytest.approx({"a": 510.0, "b": 1030.0})


def test_start_between_rounds_when_the_gpu_came_free():
    assert _ends(Overheads(launch_s=10.0, between_s=5.0)) == pytest.approx({"a": 510.0, "b": 815.0})


def test_start_between_rounds_never_before_submission():
    # b arrives at 600, after a ended (510): it starts at 605, ends at 905
    trace = [TRACE[0], TraceJob("b", 600.0, 1, 300.0, "ResNet-50", "64")]
    res = simulate(trace, ONE, get_config("fifo"), A100, restart=RestartCost.uniform(0.0),
                   overheads=Overheads(launch_s=10.0, between_s=5.0))
    assert {j.job_id: j.finish_time for j in res.jobs} == pytest.approx({"a": 510.0, "b": 905.0})


def _placement(where: dict[str, list[tuple[str, int]]]) -> Placement:
    slots: dict[str, list[set[str]]] = {"n1": [set() for _ in range(4)], "n2": [set() for _ in range(4)]}
    for job, gpus in where.items():
        for node, g in gpus:
            slots[node][g].add(job)
    return Placement({n: tuple(frozenset(s) for s in gs) for n, gs in slots.items()})


def test_delays_by_hand():
    """Before: p on n1:0, m on n1:1, r on n1:2. Now: p preempted, m migrated to n2:0, s started on n1:0 (p's
    GPU: waits for p's stop), t started on n2:1 (free since 100, submitted at 50: started between rounds at
    103, the round at 360 credits 257 s), u started on n1:2 packed with running r (that is the round's
    work: launch only), v started on n2:2 (free since 300, submitted at 340: it started at 343)."""
    o = Overheads(launch_s=2.0, stop_s=7.0, between_s=3.0)
    before = _placement({"p": [("n1", 0)], "m": [("n1", 1)], "r": [("n1", 2)]})
    now = _placement({"m": [("n2", 0)], "s": [("n1", 0)], "t": [("n2", 1)], "r": [("n1", 2)], "u": [("n1", 2)],
                      "v": [("n2", 2)]})
    d = RoundDecision(now, started=("s", "t", "u", "v"), preempted=("p",), migrated=("m",), kept=("r",),
                      packed=(PackedPair("r", "u", 0.6, 0.6),), pending=())
    free = {("n2", 1): 100.0, ("n2", 2): 300.0, ("n2", 0): 0.0, ("n2", 3): 0.0, ("n1", 3): 0.0}
    got = o.delays(d, before, 360.0, 360.0, free, {"s": 0.0, "t": 50.0, "u": 0.0, "v": 340.0})
    assert got == pytest.approx({"m": 9.0, "s": 9.0, "t": -257.0, "u": 2.0, "v": -17.0})
    # at most one round back; without starts between rounds, the launch only
    assert o.delays(d, before, 1000.0, 360.0, free, {"t": 0.0})["t"] == -360.0
    assert Overheads(2.0, 7.0).delays(d, before, 360.0, 360.0, free, {})["t"] == 2.0
    # a round that migrates: its migrated job and its start onto the vacated GPU wait migrate_s instead
    o = Overheads(launch_s=2.0, stop_s=7.0, between_s=3.0, migrate_s=11.0)
    got = o.delays(d, before, 360.0, 360.0, free, {"s": 0.0, "t": 50.0, "u": 0.0, "v": 340.0})
    assert got == pytest.approx({"m": 13.0, "s": 13.0, "t": -257.0, "u": 2.0, "v": -17.0})
    # a round that only preempts: stop_s
    d = RoundDecision(now, started=("s",), preempted=("p", "m"), migrated=(), kept=("r",), packed=(), pending=())
    assert o.delays(d, before, 360.0, 360.0, free, {"s": 0.0}) == pytest.approx({"s": 9.0})


def test_free_after_and_scaling():
    gpus = [("n", 0), ("n", 1), ("n", 2)]
    got = free_after({("n", 0): 5.0}, {("n", 1): 400.0}, {("n", 2)}, gpus, 360.0)
    assert got == {("n", 0): 5.0, ("n", 1): 400.0}
    got = free_after({}, {}, set(), gpus, 360.0)  # stopped jobs left them at the round's start
    assert got == dict.fromkeys(gpus, 360.0)
    assert Overheads(1.0, 2.0, 0.5, 0.25).scaled(40) == Overheads(40.0, 80.0, 20.0, 10.0)
    assert Overheads(1.0, 2.0, 0.5, 0.25, 3.0).scaled(40) == Overheads(40.0, 80.0, 20.0, 10.0, 120.0)
    assert REAL_DAEMON.scaled(1) == REAL_DAEMON and REAL_PLAIN.stop_s == 0.0
    with pytest.raises(InputError):
        Overheads(launch_s=-1.0)
    with pytest.raises(InputError):
        Overheads(migrate_s=-1.0)


def test_service_counts_from_the_start():
    """b's round at 720 (b started between rounds at 515, 205 s before it): it ends 95 s into the round,
    and its service and run time are the 300 s it ran, as the daemon counts Slurm's run time."""
    b = TRACE[1]
    cols = JobColumns(1)
    live = {"b": LiveJob(b, job_of(b), remaining=300.0, cols=cols, k=0)}
    views = {"b": view_of(live["b"], False)}
    d = RoundDecision(_one("b"), started=("b",), preempted=(), migrated=(), kept=(), packed=(), pending=())
    got = run_round(d, live, cols, SpeedModel(A100, ONE), RestartCost.uniform(0.0), 360.0, 720.0, views,
                    delays={"b": -205.0})
    assert got.finished == {"b"} and live["b"].finish == pytest.approx(815.0)
    assert live["b"].executed == pytest.approx(300.0) and live["b"].attained == pytest.approx(300.0)
    # a launch of 10 s into the round: computing (and counted) from 10 s on, running past the round
    cols = JobColumns(1)
    live = {"b": LiveJob(b, job_of(b), remaining=1000.0, cols=cols, k=0)}
    got = run_round(d, live, cols, SpeedModel(A100, ONE), RestartCost.uniform(0.0), 360.0, 720.0, views,
                    delays={"b": 10.0})
    assert not got.finished and live["b"].remaining == pytest.approx(650.0)
    assert live["b"].executed == pytest.approx(350.0) and live["b"].attained == pytest.approx(350.0)


def _one(job: str) -> Placement:
    return Placement({"node1": (frozenset({job}),)})
