"""`tesserae trace generate|show|convert` through its own argparse hook."""

from __future__ import annotations

import argparse
import json

import pytest

from tesserae_slurm.model import InputError
from tesserae_slurm.sim.traces import generate_gavel, generate_tesserae, load_trace
from tesserae_slurm.sim.traces.cli import add_parser


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="tesserae")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(list(argv))
    return args.func(args)


@pytest.mark.parametrize("style,make", [
    ("tesserae", lambda: generate_tesserae(40, 30, 4)),
    ("gavel", lambda: generate_gavel(40, 30, 4)),
], ids=["tesserae", "gavel"])
def test_generate_writes_the_seeded_trace(tmp_path, style, make):
    out = tmp_path / "t.csv"
    argv = ["trace", "generate", "--style", style, "--jobs", "40", "--rate", "30", "--seed", "4", "-o", str(out)]
    assert run(*argv) == 0
    assert load_trace(out).jobs == make().jobs


def test_show_json_summary(capsys):
    assert run("trace", "show", "sample", "--json") == 0
    s = json.loads(capsys.readouterr().out)
    assert s["jobs"] == 10 and s["gpu_mix"] == {"1": 5, "2": 3, "4": 2}
    assert s["duration_s"]["p0"] == 1244.0 and s["duration_s"]["p100"] == 9971.0
    assert s["models"]["resnet50"] == 3


def test_show_text(capsys):
    assert run("trace", "show", "demo") == 0
    out = capsys.readouterr().out
    assert out.startswith("trace demo: 60 jobs") and "GPUs per job: 1:" in out and "median" in out


def test_convert_shockwave_to_a100_csv(tmp_path, capsys):
    out = tmp_path / "sw.csv"
    assert run("trace", "convert", "shockwave-120", "--models", "a100", "-o", str(out)) == 0
    t = load_trace(out)
    assert len(t) == 120 and t[0].model == "vgg19" and t[0].source_type == "LM (batch size 10)"
    assert run("trace", "convert", str(out), "-o", "-") == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("0,0,1,1418,vgg19,32,134583,")


def test_cli_errors_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="--models applies to --style gavel only"):
        run("trace", "generate", "--models", "gavel", "-o", str(tmp_path / "x.csv"))
    with pytest.raises(InputError, match="no such file"):
        run("trace", "show", str(tmp_path / "missing.csv"))
