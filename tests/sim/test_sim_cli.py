"""`tesserae simulate`, `tesserae compare` and `tesserae demo` end to end (in-process)."""

from __future__ import annotations

import json

import pytest

from tesserae_slurm.cli.main import main


def cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_simulate_prints_a_summary_and_writes_json(tmp_path, capsys):
    out = tmp_path / "r" / "res.json"
    code, stdout, _ = cli(capsys, "simulate", "--trace", "sample", "--cluster", "2x4", "--policy", "tesserae-t",
                          "--json", str(out), "--check")
    assert code == 0 and stdout.startswith("POLICY") and "tesserae-t" in stdout
    data = json.loads(out.read_text())
    for key in ("policy", "jobs", "avg_jct_s", "makespan_s", "migrations", "preemptions", "per_job"):
        assert key in data
    assert set(data["ftf"]) >= {"worst", "median"} and set(data["decision_ms"]) >= {"median", "p99"}
    assert data["jobs"] == len(data["per_job"]) == 10
    assert data["avg_jct_s"] == pytest.approx(sum(j["jct"] for j in data["per_job"]) / 10)


def test_simulate_json_to_stdout_with_options(capsys):
    code, stdout, _ = cli(capsys, "simulate", "--trace", "sample", "--cluster", "1x4", "--policy", "tiresias",
                          "--policy-opt", "promote_knob=2", "--policy-opt", "queue_limits=[3600]",
                          "--restart-s", "0", "--round", "120", "--noise", "0.3", "--seed", "7", "--json", "-")
    data = json.loads(stdout)
    assert code == 0 and data["round_s"] == 120 and data["seed"] == 7
    assert data["settings"]["policy_options"] == {"promote_knob": 2, "queue_limits": [3600]}
    assert data["settings"]["restart"] == {"default_s": 0.0, "per_model": {}}


def test_simulate_with_a_packing_floor(capsys):
    code, stdout, _ = cli(capsys, "simulate", "--trace", "gen:tesserae:60:80:1", "--cluster", "2x4",
                          "--min-speed", "0.6", "--json", "-")
    data = json.loads(stdout)
    assert code == 0 and data["settings"]["min_speed"] == 0.6
    code, stdout, _ = cli(capsys, "simulate", "--trace", "gen:tesserae:60:80:1", "--cluster", "2x4", "--json", "-")
    assert code == 0 and "min_speed" not in json.loads(stdout)["settings"]  # off: the settings of every run so far


def test_simulate_with_a_decision_profile_and_an_llm_strategy(tmp_path, capsys):
    from tesserae_slurm.profiles import load_profile, write_profile_csv

    table = tmp_path / "site.csv"
    write_profile_csv(load_profile("a100"), table)
    code, stdout, _ = cli(capsys, "simulate", "--trace", "sample", "--cluster", "2x4", "--decision-profile",
                          str(table), "--llm-strategy", "default-pp", "--json", "-")
    data = json.loads(stdout)
    assert code == 0 and data["settings"]["llm_strategy"] == "default-pp"
    assert data["settings"]["decision_profile"] == "site+default-pp" and data["settings"]["profile"] == "a100"
    assert data["infeasible_pair_rounds"] == 0  # the same table as the truth: every pair it packs fits
    code, _, err = cli(capsys, "simulate", "--trace", "sample", "--decision-profile", str(tmp_path / "no.csv"))
    assert code == 2 and err.count("\n") == 1 and "unknown profile" in err


def test_simulate_heterogeneous_cluster_picks_the_gavel_profile(capsys):
    code, stdout, _ = cli(capsys, "simulate", "--trace", "sample", "--cluster", "1x4:v100,1x4:k80",
                          "--policy", "fifo", "--json", "-")
    data = json.loads(stdout)
    assert code == 0 and data["settings"]["profile"] == "gavel" and data["settings"]["reference_gpu"] == "v100"


def test_compare_writes_a_report(tmp_path, capsys):
    code, stdout, err = cli(capsys, "compare", "--trace", "sample", "--cluster", "1x4",
                            "--policies", "fifo,tesserae-t", "--out", str(tmp_path), "--workers", "2")
    assert code == 0 and "comparing 2 configurations" in err
    progress = [line for line in err.splitlines() if line.startswith("compare: ")]  # one line per finished run
    assert [line.split(" runs done")[0] for line in progress] == ["compare: 1/2", "compare: 2/2"]
    assert {line.split("(")[1].split(")")[0] for line in progress} == {"fifo", "tesserae-t"}
    assert [line.split()[0] for line in stdout.splitlines()[1:3]] == ["fifo", "tesserae-t"]
    report = (tmp_path / "report.md").read_text()
    assert "| fifo |" in report and "| tesserae-t |" in report
    runs = json.loads((tmp_path / "results.json").read_text())["runs"]
    assert [r["policy"] for r in runs] == ["fifo", "tesserae-t"] and all(len(r["per_job"]) == 10 for r in runs)
    for png in ("jct_cdf.png", "ftf_cdf.png", "decision_time.png"):
        assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_demo_compares_on_the_shipped_trace(tmp_path, capsys):
    code, stdout, _ = cli(capsys, "demo", "--out", str(tmp_path), "--workers", "1")
    assert code == 0
    assert [line.split()[0] for line in stdout.splitlines()[1:7]] == [
        "tiresias", "tiresias-single", "tesserae-t", "tesserae-t-fair", "tesserae-t-nomig", "slurm-backfill"]
    assert (tmp_path / "report.md").exists()


def test_demo_engine_mode(capsys):
    code, stdout, _ = cli(capsys, "demo", "--engine")
    assert code == 0 and "== tesserae plan" in stdout and "== tesserae migrate" in stdout


@pytest.mark.parametrize("argv,message", [
    (["simulate", "--policy", "nope"], "unknown policy configuration(s) nope"),
    (["simulate", "--trace", "/no/such/file.csv"], "no such file"),
    (["simulate", "--trace", "gen:tesserae:x"], "bad generator spec"),
    (["simulate", "--cluster", "4y4"], "bad cluster spec"),
    (["simulate", "--noise", "1.5"], "--noise must be in [0, 1]"),
    (["simulate", "--min-speed", "2"], "--min-speed must be in [0, 1]"),
    (["simulate", "--round", "0"], "--round must be > 0"),
    (["simulate", "--restart-model", "vgg19"], "expected KEY=VALUE"),
    (["simulate", "--restart-model", "vgg19=abc"], "expected seconds"),
    (["simulate", "--trace", "sample", "--policy-opt", "bogus=1", "--policy", "fifo"], "bad options"),
    (["simulate", "--trace", "sample", "--cluster", "1x2"], "needs 4 GPUs"),
    (["simulate", "--cluster", "1x4:v100", "--profile", "a100"], "not in profile a100"),
    (["compare", "--policies", "fifo,fifo"], "lists a configuration twice"),
    (["compare", "--policies", "fifo,zzz"], "unknown policy configuration(s) zzz"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, message):
    code, stdout, err = cli(capsys, *argv)
    assert code == 2 and stdout == ""
    assert err.count("\n") == 1 and err.startswith(f"tesserae {argv[0]}: error: ") and message in err
