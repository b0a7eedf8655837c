"""inputs: which jobs the round schedules (and why the others are not), the GPUs placed jobs hold as the
current Placement, and the priority the slurm-priority order sees."""

from __future__ import annotations

from dataclasses import replace

from tesserae_slurm.daemon.operators import admin
from tesserae_slurm.daemon.round.guard import save_holds
from tesserae_slurm.daemon.round.inputs import InputBuilder, site_priority
from tesserae_slurm.daemon.round.observe import build_snapshot
from tesserae_slurm.daemon.state.store import AdminRow, JobRow
from tesserae_slurm.model import Placement
from tesserae_slurm.model.meta import JobMeta
from tesserae_slurm.site.partition import scheduling_profile
from tesserae_slurm.slurm.types import SlurmJob, SlurmJobState as S

from ..fake_slurm import managed


def job(state: S, priority: int, reason: str = "") -> SlurmJob:
    return SlurmJob(7, "j", "u", state, reason=reason, priority=priority)


def test_held_jobs_keep_the_last_priority_slurm_gave_them():
    memory: dict[str, int] = {}
    assert site_priority(memory, "7", job(S.PENDING, 0, "JobHeldAdmin")) == 0.0  # never unheld: nothing known
    assert site_priority(memory, "7", job(S.RUNNING, 4200)) == 4200.0  # released: Slurm's own value
    assert site_priority(memory, "7", job(S.RUNNING, 4300)) == 4300.0  # and its newest
    # preempted: requeue-held, Slurm reports 0 again; the job keeps its place
    assert site_priority(memory, "7", job(S.PENDING, 0, "job requeued in held state")) == 4300.0


def _world_of_jobs(world) -> None:
    """1: waiting; 2: held by an administrator; 3: held by `tesserae hold`; 4: 3 GPUs (not a power of two,
    a hand-written Comment); 5: running on node1 GPU 0; 6: running, its node left the partition."""
    jobs = {"1": managed(1, submit_time=10), "2": replace(managed(2), reason="JobHeldAdmin",
                                                            state_reason="JobHeldAdmin"),
            "3": managed(3), "4": replace(managed(4), comment=JobMeta(3, "DCGAN", "32").encode()),
            "5": managed(5, state=S.RUNNING, submit_time=5, account="physics"),
            "6": managed(6, state=S.RUNNING)}
    world.slurm.jobs = jobs
    with world.store.session() as s:
        for j, sj in jobs.items():
            placed = {"5": "node1:0", "6": "gone:0"}.get(j, "")
            s.add(JobRow(job_id=j, user="alice", num_gpus=1, submit_time=float(sj.submit_time or 0), meta=sj.comment,
                         state="RUNNING" if placed else "PENDING", gpus=placed, executed_time=7.0 if placed else 0.0))
    world.store.add_admin_actions([AdminRow(time=0.0, user="root", uid=0, command="hold", target="3",
                                            status="accepted")])


def test_the_scheduled_jobs_in_arrival_order_and_why_the_others_wait(world) -> None:
    _world_of_jobs(world)
    snap = build_snapshot(1000.0, tuple(world.slurm.jobs.values()), world.slurm.nodes, world.cfg)
    inp = InputBuilder(world.journal).build(snap, world.cfg, scheduling_profile("a100"),
                                            admin.standing(world.store), dry_run=False)
    assert [v.id for v in inp.views] == ["5", "1", "6"]
    assert [v.running for v in inp.views] == [True, False, True] and inp.views[0].executed_time == 7.0
    assert inp.jobs["5"].account == "physics"
    assert inp.excluded["2"] == "held by an administrator"
    assert inp.excluded["3"].startswith("held by root with `tesserae hold`")
    assert inp.excluded["4"].startswith("invalid tesserae metadata: --gpus 3: the GPU count must be a power of two")
    assert inp.actual == {"5": {"node1": (0,)}, "6": {"gone": (0,)}}
    assert inp.current.job_gpus() == {"5": (("node1", 0),)}  # job 6's node is not schedulable: the plan moves it


def test_the_daemons_own_admin_hold_does_not_keep_a_job_from_being_scheduled(world) -> None:
    _world_of_jobs(world)
    save_holds(world.store, ["2"])
    snap = build_snapshot(1000.0, tuple(world.slurm.jobs.values()), world.slurm.nodes, world.cfg)
    inp = InputBuilder(world.journal).build(snap, world.cfg, scheduling_profile("a100"), admin.Standing({}, {}, []),
                                            dry_run=False)
    assert "2" in inp.jobs and "3" in inp.jobs and "2" not in inp.excluded


def test_a_dry_run_accounts_the_shadow_placement_of_the_last_dry_round(world) -> None:
    _world_of_jobs(world)
    world.journal.save_shadow(Placement.from_lists({"node2": [["1"], ["1"], [], ["foreign:57"]]}))
    snap = build_snapshot(1000.0, tuple(world.slurm.jobs.values()), world.slurm.nodes, world.cfg)
    inp = InputBuilder(world.journal).build(snap, world.cfg, scheduling_profile("a100"), admin.Standing({}, {}, []),
                                            dry_run=True)
    assert inp.actual == {"1": {"node2": (0, 1)}}
    assert inp.current.job_gpus() == {"1": (("node2", 0), ("node2", 1))}


def test_a_finished_job_slurm_still_lists_is_not_scheduled_and_each_view_carries_its_rows_counters(world) -> None:
    world.slurm.jobs = {"1": managed(1, submit_time=30), "2": managed(2, state=S.COMPLETED, submit_time=10),
                        "3": managed(3, submit_time=20)}
    with world.store.session() as s:
        s.add(JobRow(job_id="1", user="alice", num_gpus=1, submit_time=30.0, meta=world.slurm.jobs["1"].comment,
                     attained_service=8.0, executed_time=4.0, rounds_run=2, work_done=3.0))
        s.add(JobRow(job_id="2", user="alice", num_gpus=1, submit_time=10.0, meta=world.slurm.jobs["2"].comment,
                     state="COMPLETED"))
        s.add(JobRow(job_id="3", user="alice", num_gpus=1, submit_time=20.0, meta=world.slurm.jobs["3"].comment))
    snap = build_snapshot(1000.0, tuple(world.slurm.jobs.values()), world.slurm.nodes, world.cfg)
    inp = InputBuilder(world.journal).build(snap, world.cfg, scheduling_profile("a100"), admin.Standing({}, {}, []),
                                            dry_run=False)
    assert [(v.id, v.submit_time) for v in inp.views] == [("3", 20.0), ("1", 30.0)]
    one = inp.views[1]
    assert (one.attained_service, one.executed_time, one.rounds_run, one.work_done) == (8.0, 4.0, 2, 3.0)


def test_a_job_with_unreadable_metadata_is_left_to_reconcile_and_logged(world, caplog) -> None:
    import logging

    world.slurm.jobs = {"1": replace(managed(1), comment="tesserae:v1:{broken")}
    with world.store.session() as s:
        s.add(JobRow(job_id="1", user="alice", num_gpus=1, submit_time=0.0))
    snap = build_snapshot(1000.0, tuple(world.slurm.jobs.values()), world.slurm.nodes, world.cfg)
    with caplog.at_level(logging.WARNING, logger="tesserae_slurm.daemon.round.inputs"):
        inp = InputBuilder(world.journal).build(snap, world.cfg, scheduling_profile("a100"),
                                                admin.Standing({}, {}, []), dry_run=False)
    assert not inp.views and "1" not in inp.excluded  # reconcile holds it and gives the reason
    (record,) = caplog.records
    assert record.getMessage() == f"job 1 not scheduled: invalid tesserae metadata: {snap.jobs['1'].meta_error}"


def test_accounting_that_puts_a_third_job_on_a_gpu_is_reported_and_the_third_left_out() -> None:
    from tesserae_slurm.daemon.round.inputs import current_placement
    from tesserae_slurm.model import Cluster, Node

    cluster = Cluster((Node("node1", 4, "a100"),))
    current, problems = current_placement(cluster, {"a": {"node1": (0,)}, "b": {"node1": (0,)}, "c": {"node1": (0, 1)}})
    assert problems == ["node1 GPU 0 would hold ['a', 'b', 'c']"]
    assert current.job_gpus() == {"a": (("node1", 0),), "b": (("node1", 0),), "c": (("node1", 1),)}
