"""The dev cluster itself on this host: status, fake GPUs, ports, outage, clean teardown."""

from __future__ import annotations

import socket
import stat
import time

import pytest

from tesserae_slurm.devcluster import DevCluster, DevClusterError, procs
from tesserae_slurm.slurm import (
    RetryPolicy,
    SlurmCliBackend,
    SlurmJobState,
    SlurmRunner,
    SlurmUnavailable,
)

pytestmark = [pytest.mark.slurm_live, pytest.mark.every_release]  # two tests start their own clusters without the fixture


def wait_for(predicate, what: str, timeout_s: float = 30.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}")


def test_status_reports_every_daemon_alive(devcluster):
    status = devcluster.status()
    assert status.up
    names = [name for name, _, _ in status.daemons]
    assert sorted(names) == sorted(["munged", "slurmctld", "slurmd:node1", "slurmd:node2", "slurmd:node3", "slurmd:node4"])
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
    try:
        pids = {k: p for k, p, _ in other.status().daemons}
        other.up()  # already up: no restart
        assert {k: p for k, p, _ in other.status().daemons} == pids

        backend = SlurmCliBackend(other.env())
        jid = backend.submit([], ["--output=/dev/null", "--gres=gpu:1", "--wrap", "sleep 300"])
        wait_for(lambda: any(j.job_id == jid and j.state is SlurmJobState.RUNNING for j in backend.list_jobs()), "job RUNNING")
        conf = str(other.slurm_conf)
        ours = [p for p in procs.all_pids() if procs.belongs_to(p, conf) and p not in procs.protected_pids()]
        assert len(ours) >= 4  # munged, slurmctld, slurmd, slurmstepd (+ the job)
    finally:
        other.down()
    assert not [p for p in ours if procs.pid_alive(p)]
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
