"""`tesserae bench cli`: the admin-latency benchmark runs end to end at a tiny size (its numbers are not
checked here: a benchmark, not a timed test)."""

from __future__ import annotations

import json

from tesserae_slurm.bench.cli_latency import build_db
from tesserae_slurm.cli.main import main
from tesserae_slurm.daemon.state.store import Store


def test_the_database_is_written_through_the_store(tmp_path):
    info = build_db(tmp_path / "s.db", jobs=40, rounds=6)
    store = Store.open(tmp_path / "s.db", read_only=True)
    jobs = store.jobs()
    assert len(jobs) == 40 and info["round"] == "6" and store.job(info["job"]).state == "RUNNING"
    assert len(store.rounds(limit=100)) == 6 and info["job"] in json.loads(store.round(6).decision_json)["order"]
    store.close()


def test_bench_cli_times_every_admin_command(tmp_path, capsys):
    code = main(["bench", "cli", "--jobs", "30", "--rounds", "3", "--repeats", "1", "--json",
                 "--db", str(tmp_path / "s.db")])
    out, err = capsys.readouterr()
    assert code == 0, err
    body = json.loads(out)
    assert [c["command"] for c in body["commands"]][:3] == ["--help", "jobs", "jobs --all --json"]
    assert [c["command"].split()[0] for c in body["commands"]][3:] == ["rounds", "round", "explain"]
    assert body["commands"][4]["command"] == "round show last"
    assert all(len(c["runs_s"]) == 1 and c["median_s"] > 0 for c in body["commands"])
    assert err.count("bench cli: ") == 6  # a progress line per command


def test_bad_checkout_is_one_line(tmp_path, capsys):
    assert main(["bench", "cli", "--checkout", str(tmp_path)]) == 2
    assert "not a tesserae-slurm source tree" in capsys.readouterr().err
