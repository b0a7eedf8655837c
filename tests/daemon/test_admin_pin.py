"""`tesserae pin|keep-off JOB NODELIST` and `unpin JOB` without Slurm: the request, its record, the rule
in force, and the one-line refusals. Their effect on a real cluster is in test_admin_actions_live.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tesserae_slurm.daemon.operators import admin
from tesserae_slurm.daemon.state.store import JobRow, RoundRow, Store
from tesserae_slurm.model import InputError
from tesserae_slurm.placement.node_rules import NodeRule
from tesserae_slurm.site.load import load_config

AS_USER = """
import os, sys
import tesserae_slurm.cli.main as m, tesserae_slurm.cli.admin.act, tesserae_slurm.daemon.operators.admin
import tesserae_slurm.site.config, tesserae_slurm.daemon.state.store, tesserae_slurm.slurm.parse
uid = int(sys.argv[1])
if os.geteuid() != uid:
    os.setgid(65534)
    os.setuid(uid)
sys.exit(m.main(sys.argv[2:]))
"""


@pytest.fixture
def cfg_path(tmp_path: Path) -> Iterator[Path]:
    shared = Path(tempfile.mkdtemp(prefix="tesserae-pin-"))  # the second user reads the config there
    shared.chmod(0o755)  # (pytest's tmp dirs are the owner's only)
    cfg = shared / "tesserae.yaml"
    cfg.write_text(f"state: {{database: {tmp_path / 'state.db'}}}\nmetrics: {{listen: ''}}\n")
    cfg.chmod(0o644)
    store = Store.open(tmp_path / "state.db")
    with store.session() as s:
        s.add(JobRow(job_id="5", num_gpus=2, submit_time=1.0, state="RUNNING"))
        # the nodes the command checks a node list against where Slurm cannot be asked (no Slurm here)
        s.add(RoundRow(round_id=1, started_at=1.0, policy="fifo", status="applied",
                       decision_json='{"placement": {"nodes": {"node1": [[], []], "node2": [[], []]}}}'))
    store.close()
    admin.ensure_dir(admin.requests_dir(load_config(cfg, check_policy=False)))
    yield cfg
    shutil.rmtree(shared)


def _tesserae(cfg: Path, uid: int, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TESSERAE_")}
    return subprocess.run([sys.executable, "-c", AS_USER, str(uid), *args, "--config", str(cfg)], env=env,
                          capture_output=True, text=True, timeout=120, cwd="/")


@pytest.mark.parametrize("args", [("pin", "5", "node[1-2]"), ("keep-off", "5", "node1"), ("unpin", "5")],
                         ids=["pin", "keep-off", "unpin"])
def test_a_non_operator_is_refused_in_one_line_and_leaves_no_request(cfg_path: Path, args) -> None:  # noqa: ANN001
    proc = _tesserae(cfg_path, 65534, *args)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "nobody is not a tesserae operator" in proc.stderr
    assert os.listdir(admin.requests_dir(load_config(cfg_path, check_policy=False))) == []


def test_an_operator_pins_says_when_and_the_daemon_records_who_and_the_nodes(cfg_path: Path) -> None:
    proc = _tesserae(cfg_path, os.geteuid(), "pin", "5", "node[1-2]")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("job 5 will be pinned to node[1-2] at the daemon's next round"), proc.stdout
    cfg = load_config(cfg_path, check_policy=False)
    store = Store.open(cfg.state.database)
    rows = admin.ingest(store, cfg, 7)
    assert [(r.command, r.target, r.nodes, r.status, r.round_id) for r in rows] == \
        [("pin", "5", "node[1-2]", "accepted", 7)]
    rules = admin.node_rules(admin.standing(store), ["5"])
    assert rules["5"].nodes == {"node1", "node2"} and not rules["5"].keep_off
    assert rules["5"].text.startswith(f"pinned to node[1-2] by {admin.user_name(os.geteuid())} (")


def test_the_last_pin_or_keep_off_stands_until_unpin(cfg_path: Path) -> None:
    cfg = load_config(cfg_path, check_policy=False)
    store = Store.open(cfg.state.database)
    for command, job, nodes in (("pin", "5", "node[1-3]"), ("keep-off", "6", "gpu[07-08]"), ("keep-off", "5", "node2"),
                                ("unpin", "6", ""), ("pin", "7", "node1")):
        admin.submit(cfg, command, job, nodes=nodes)
    admin.ingest(store, cfg, 1)
    rules = admin.node_rules(admin.standing(store), ["5", "6", "8"])  # 7 is not active: no rule for it
    assert rules == {"5": NodeRule(frozenset({"node2"}), True, rules["5"].text)}
    assert rules["5"].text.startswith("kept off node2 by ")
    admin.submit(cfg, "keep-off", "6", nodes="gpu[07-08]")
    admin.ingest(store, cfg, 2)
    assert admin.node_rules(admin.standing(store), ["6"])["6"].nodes == {"gpu07", "gpu08"}  # zero padding kept


@pytest.mark.parametrize(("command", "nodes", "message"), [
    ("pin", "", "not a node list"),
    ("pin", "node[3-1]", "not a node list"),
    ("keep-off", "node[1-2", "not a node list"),
    ("pin", "node1,a/b", "not a node list"),
    ("hold", "node1", "hold takes no node list"),
    ("unpin", "node1", "unpin takes no node list"),
])
def test_bad_node_lists_are_refused(command: str, nodes: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        admin.check_target(command, "5", nodes)


def test_a_bad_node_list_is_one_line_from_the_command(cfg_path: Path) -> None:
    proc = _tesserae(cfg_path, os.geteuid(), "pin", "5", "node[1-")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "not a node list" in proc.stderr, proc.stderr


def test_a_request_file_with_a_bad_node_list_is_refused_by_the_daemon(cfg_path: Path) -> None:
    """The daemon checks again: a request is a file anyone in the group may write."""
    cfg = load_config(cfg_path, check_policy=False)
    path = admin.submit(cfg, "pin", "5", nodes="node1")
    path.write_text('{"command": "pin", "target": "5", "time": 1.0, "nodes": "node[9-1]"}')
    store = Store.open(cfg.state.database)
    rows = admin.ingest(store, cfg, 1)
    assert rows[0].status == "refused" and "not a node list" in rows[0].note
    assert admin.standing(store).rules == {}


def test_a_rule_row_that_does_not_parse_is_left_out_not_a_failed_round(cfg_path: Path) -> None:
    from tesserae_slurm.daemon.state.store import AdminRow

    store = Store.open(load_config(cfg_path, check_policy=False).state.database)
    with store.session() as s:
        s.add_all([AdminRow(time=1.0, user="root", uid=0, command="pin", target="5", status="accepted", nodes="n[9-1]"),
                   AdminRow(time=1.0, user="root", uid=0, command="pin", target="6", status="accepted", nodes="n1")])
    assert set(admin.node_rules(admin.standing(store), ["5", "6"])) == {"6"}
