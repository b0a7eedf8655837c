"""The dev cluster itself on this host: status, fake GPUs, ports, outage, clean teardown."""

from __future__ import annotations

import socket
import stat

import pytest
from waiting import wait_for

from tesserae_slurm.devcluster import DevCluster, DevClusterError, procs
from tesserae_slurm.slurm import (
    RetryPolicy,
    SlurmCliBackend,
    SlurmJobState,
    SlurmRunner,
    SlurmUnavailable,
)

# two tests start their own clusters without the fixture
pytestmark = [pytest.mark.slurm_live, pytest.mark.every_release]




def test_status_reports_every_daemon_alive(devcluster):
    status = devcluster.status()
    assert status.up
    names = [name for name, _, _ in status.daemons]
    assert sorted(names) == sorted(["munged", "slurmctld", *(f"slurmd:node{i}" for i in range(1, 5))])
    assert all(alive for _, _, alive in status.daemons)
    assert "node4 tesserae* idle" in status.sinfo or "node4 tesserae* mix" in status.sinfo


def test_fake_gpus_are_char_devices_aliasing_dev_null(devcluster):
    for i in range(4):
        st = devcluster.layout.fake_gpu(i).stat()
        assert stat.S_ISCHR(st.st_mode) and (st.st_rdev >> 8, st.st_rdev & 0xFF) == (1, 3)


def test_env_points_clients_at_this_cluster(devcluster):
    assert devcluster.env() == {"SLURM_CONF": str(devcluster.root / "etc" / "slurm.conf")}


def test_busy_port_fails_clearly_and_starts_nothing(tmp_path):
    busy = procs.pick_free_ports(1)[0]
    with socket.socket() as s:
        s.bind(("0.0.0.0", busy))
        s.listen()
        cluster = DevCluster(tmp_path / "busy", nodes=1, gpus_per_node=1, ctld_port=busy)
        with pytest.raises(DevClusterError, match=f"ports already in use: {busy}"):
            cluster.up()
    assert not cluster.layout.state_file.exists()



@pytest.mark.parametrize("taken", ["slurmctld", "slurmd"])
def test_a_picked_port_taken_before_slurm_binds_it_is_picked_again(tmp_path, monkeypatch, taken):
    """Another cluster starting beside this one can take a port between the pick and the bind; up()
    picks again rather than failing (the side-by-side lanes share one loopback)."""
    real = procs.pick_free_ports
    picks: list[tuple[int, ...]] = []
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        busy = s.getsockname()[1]

        def pick(count: int, **kw) -> tuple[int, ...]:
            block = real(count, **kw)
            if not picks:  # the first pick: the taken port where slurmctld or the slurmd would bind
                block = (busy, *block[1:]) if taken == "slurmctld" else (block[0], busy, *block[2:])
            picks.append(block)
            return block

        monkeypatch.setattr(procs, "pick_free_ports", pick)
        cluster = DevCluster(tmp_path / "taken", nodes=1, gpus_per_node=1)
        try:
            cluster.up()
            assert len(picks) == 2 and busy in picks[0] and busy not in picks[1]
            assert cluster.status().up
        finally:
            cluster.down()

def test_controller_outage_ping_fails_then_recovers(devcluster):
    backend = SlurmCliBackend(devcluster.env())
    quick = SlurmCliBackend(runner=SlurmRunner(devcluster.env(), retry=RetryPolicy(retries=0)))
    held = backend.submit([], ["--hold", "--output=/dev/null", "--job-name", "survives-outage", "--wrap", "true"])
    try:
        backend.ping()
        devcluster.stop_controller()
        try:
            with pytest.raises(SlurmUnavailable, match=r"slurmctld unreachable: .* is DOWN"):
                backend.ping()
            with pytest.raises(SlurmUnavailable):
                quick.list_jobs()
        finally:
            devcluster.start_controller()
        backend.ping()
        recovered = {j.job_id: j for j in backend.list_jobs("tesserae")}
        assert recovered[held].state is SlurmJobState.PENDING and recovered[held].name == "survives-outage"
    finally:
        backend.cancel(held)


def test_second_cluster_up_is_idempotent_and_down_leaves_nothing(devcluster, tmp_path):
    other = DevCluster(tmp_path / "dc", nodes=1, gpus_per_node=1, shards_per_gpu=0, job_submit=False)
    other.up()
    conf = str(other.slurm_conf)

    def ours() -> set[int]:
        """The cluster's processes, and each job process's slurmstepd (an empty environment on 24.11+)."""
        found = {p for p in procs.all_pids() if procs.belongs_to(p, conf) and p not in procs.protected_pids()}
        return found | {q for p in found if "SLURM_JOB_ID" in procs.proc_environ(p)
                        if (q := procs.proc_parent(p)) is not None and procs.proc_comm(q) == "slurmstepd"}

    try:
        pids = {k: p for k, p, _ in other.status().daemons}
        other.up()  # already up: no restart
        assert {k: p for k, p, _ in other.status().daemons} == pids

        backend = SlurmCliBackend(other.env())
        backend.submit([], ["--output=/dev/null", "--gres=gpu:1", "--wrap", "sleep 300"])
        # munged, slurmctld (+ slurmscriptd), slurmd, slurmstepd, the job's shell and its sleep
        def with_job() -> set[int]:
            now = ours()
            return now if any(procs.proc_comm(p) == "sleep" for p in now) else set()

        seen = wait_for(with_job, 30, "the job's sleep to run")
        assert {"munged", "slurmctld", "slurmd", "slurmstepd"} <= {procs.proc_comm(p) for p in seen}, \
            [procs.describe(p) for p in seen]
    finally:
        other.down()  # returns once every process of the cluster is gone, or raises naming the survivors
    assert not [procs.describe(p) for p in seen if procs.pid_alive(p)]
    assert not other.status().up
    other.down()  # idempotent
    # the session cluster was not touched
    SlurmCliBackend(devcluster.env()).ping()
    assert devcluster.status().up


def test_cli_up_status_down(tmp_path, capsys):
    from tesserae_slurm.devcluster.__main__ import main

    root = tmp_path / "cli"
    assert main(["up", "--dir", str(root), "--nodes", "1", "--gpus", "2", "--no-install"]) == 0
    try:
        out = capsys.readouterr().out
        assert f"export SLURM_CONF={root}/etc/slurm.conf" in out and "node1 tesserae* idle gpu:2,shard:4" in out
        assert main(["status", "--dir", str(root)]) == 0
    finally:
        assert main(["down", "--dir", str(root)]) == 0
    assert main(["status", "--dir", str(root)]) == 3
    assert "(not up)" in capsys.readouterr().out
