"""Dev cluster pieces that need no Slurm: generated config text, port picking, the CLI parser."""

from __future__ import annotations

import argparse
import socket
from pathlib import Path

import pytest

from tesserae_slurm.devcluster import add_parser
from tesserae_slurm.devcluster.cli import default_dir
from tesserae_slurm.devcluster.slurm_conf import (
    DevClusterLayout,
    DevClusterSpec,
    render_cgroup_conf,
    render_gres_conf,
    render_job_submit_lua,
    render_slurm_conf,
)
from tesserae_slurm.devcluster.errors import DevClusterError
from tesserae_slurm.devcluster.install import apt_commands
from tesserae_slurm.devcluster.procs import (
    check_ports_free,
    PORT_SCAN_END,
    PORT_SCAN_START,
    SERVICE_PORTS,
    pick_free_ports,
    port_is_free,
)

LAYOUT = DevClusterLayout(Path("/dc"))


def conf_lines(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out.setdefault(key, []).append(value)
    return out


def test_slurm_conf_nodes_ports_partition():
    spec = DevClusterSpec(nodes=3, gpus_per_node=4, controller_host="vm", ctld_port=21000, slurmd_ports=(21001, 21002, 21003))
    conf = conf_lines(render_slurm_conf(spec, LAYOUT))
    assert conf["SlurmctldHost"] == ["vm(127.0.0.1)"] and conf["SlurmctldPort"] == ["21000"]
    assert conf["AuthInfo"] == ["socket=/dc/munge/munge.sock"]
    assert conf["GresTypes"] == ["gpu,shard"]
    nodes = conf["NodeName"]
    assert len(nodes) == 3
    assert nodes[1].startswith("node2 ") and "Port=21002" in nodes[1] and "Gres=gpu:4,shard:8" in nodes[1]
    assert conf["PartitionName"] == ["tesserae Nodes=node[1-3] Default=YES MaxTime=INFINITE State=UP"]
    # no hard-coded default ports anywhere
    assert "6817" not in render_slurm_conf(spec, LAYOUT)


def test_job_submit_lua_is_on_by_default_as_on_a_site():
    assert "JobSubmitPlugins=lua" in render_slurm_conf(DevClusterSpec(), LAYOUT).splitlines()
    assert "JobSubmitPlugins=lua" not in render_slurm_conf(DevClusterSpec(job_submit=False), LAYOUT)
    lua = render_job_submit_lua(DevClusterSpec(partition="gpu-sched"))
    assert 'local MANAGED_PARTITION = "gpu-sched"' in lua and '"tesserae"' not in lua.split("local TAG")[0]
    shipped = (Path(__file__).resolve().parents[2] / "etc" / "job_submit.lua").read_text()
    assert render_job_submit_lua(DevClusterSpec()) == shipped  # the file a site installs, unchanged


def test_gres_conf_fake_devices():
    spec = DevClusterSpec(nodes=2, gpus_per_node=4)
    text = render_gres_conf(spec, LAYOUT)
    assert "AutoDetect=off" in text
    assert "NodeName=node[1-2] Name=gpu File=/dc/fakegpu/nvidia[0-3]" in text
    assert "NodeName=node[1-2] Name=shard Count=8" in text


def test_gres_conf_single_gpu_without_shards():
    spec = DevClusterSpec(nodes=1, gpus_per_node=1, shards_per_gpu=0)
    text = render_gres_conf(spec, LAYOUT)
    assert "NodeName=node1 Name=gpu File=/dc/fakegpu/nvidia0" in text and "shard" not in text
    assert "GresTypes=gpu\n" in render_slurm_conf(spec, LAYOUT)


def test_cgroup_conf_never_disables_plugin():
    text = render_cgroup_conf()
    assert "CgroupAutomount=no" in text and "CgroupPlugin" not in text


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"nodes": 0}, "nodes"),
        ({"gpus_per_node": 0}, "gpus_per_node"),
        ({"nodes": 2, "slurmd_ports": (1,)}, "slurmd ports"),
        ({"partition": "bad name"}, "partition"),
    ],
    ids=["no-nodes", "no-gpus", "port-count", "partition"],
)
def test_spec_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        DevClusterSpec(**kwargs)


def test_pick_free_ports_are_consecutive_and_free():
    ports = pick_free_ports(5)
    assert list(ports) == list(range(ports[0], ports[0] + 5))
    assert all(port_is_free(p) for p in ports)


def test_service_ports_lie_outside_every_dev_clusters_scan():
    """A walkthrough picks its page's port a minute before the daemon binds it; a dev cluster brought
    up in that minute must not be able to take it (a 22.05 lane failed so, stop 41)."""
    low, high = SERVICE_PORTS
    assert high <= 32768 and low >= PORT_SCAN_END
    for _ in range(20):
        web, metrics = pick_free_ports(2, scan=SERVICE_PORTS)
        assert low <= web < metrics < high
        assert not PORT_SCAN_START <= web < PORT_SCAN_END


def test_busy_port_is_detected_and_skipped():
    with socket.socket() as s:
        for _ in range(50):  # another cluster may take the picked port before we bind it
            busy = pick_free_ports(1)[0]
            try:
                s.bind(("0.0.0.0", busy))
                break
            except OSError:
                continue
        else:
            pytest.fail("every picked port was taken before the test could bind it")
        s.listen()
        assert not port_is_free(busy)
        with pytest.raises(DevClusterError, match=f"ports already in use: {busy}"):
            check_ports_free([busy])
        # scanning starts at the busy port, so the first block must be skipped
        assert busy not in pick_free_ports(3, start=busy)


def test_apt_commands_are_argv_lists():
    update, install = apt_commands()
    assert update == ["apt-get", "update"]
    assert install[:4] == ["apt-get", "install", "-y", "--no-install-recommends"]
    assert set(install[4:]) == {"slurmctld", "slurmd", "slurm-client", "munge"}


def test_cli_parser(monkeypatch, tmp_path):
    monkeypatch.setenv("TESSERAE_DEVCLUSTER_DIR", str(tmp_path))
    parser = argparse.ArgumentParser(prog="tesserae")
    add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["devcluster", "up", "--nodes", "2", "--gpus", "8"])
    assert (args.action, args.nodes, args.gpus, args.dir) == ("up", 2, 8, None)
    assert callable(args.func) and default_dir() == tmp_path
    with pytest.raises(SystemExit):
        parser.parse_args(["devcluster", "restart"])
