"""tsbatch's translation of sbatch's GPU and node options, its #SBATCH reader and rewrite, --help and
--dry-run without Slurm (--cluster)."""

from __future__ import annotations

import pytest

from tesserae_slurm.cli.tsbatch import main
from tesserae_slurm.model import InputError
from tesserae_slurm.model.meta import JobMeta
from tesserae_slurm.site.partition import PartitionShape, scheduling_profile
from tesserae_slurm.tsbatch.gpus import cluster_shape
from tesserae_slurm.tsbatch.header import header_tokens
from tesserae_slurm.tsbatch.options import REFUSED, make_submission, parse_argv

SHAPE = PartitionShape((("a100", 4),) * 4)  # 4 nodes x 4 A100
MIXED = PartitionShape((("a100", 4),) * 2 + (("v100", 4),) * 2)
PROFILE = scheduling_profile("a100")
PLAIN = "#!/bin/bash\necho hi\n"


def submit(argv: list[str], text: str | None = PLAIN, shape: PartitionShape = SHAPE):
    own, sbatch, script = parse_argv(["--no-profile", *argv, *(["job.sh"] if text is not None else [])])
    return make_submission(own, sbatch, script, "tesserae", text, shape, PROFILE)


def test_ntasks_sets_the_task_count_over_ntasks_per_node():
    # Slurm: -n is the job's task count; --ntasks-per-node then only caps a node's share
    sub = submit(["--gpus-per-task=1", "-n", "2", "--ntasks-per-node=4", "-N", "1", "-t", "5"])
    assert (sub.meta.num_gpus, sub.nodes) == (2, 1)


@pytest.mark.parametrize("argv,gpus,nodes", [
    ([], 1, 1),
    (["-G", "2"], 2, 1),
    (["-G2"], 2, 1),
    (["--gpus=2"], 2, 1),
    (["--gpus", "a100:2"], 2, 1),
    (["--gpus=A100:2"], 2, 1),  # Slurm's type names are the config's, lower-cased
    (["--gres=gpu:2"], 2, 1),
    (["--gres", "gpu:a100:2"], 2, 1),
    (["--gres=gpu"], 1, 1),  # Slurm: a bare gpu GRES is one per node
    (["--gres=gpu:a100"], 1, 1),
    (["--gres=gpu:A100:2"], 2, 1),  # type names lower-cased here too
    (["-N", "1", "--gpus-per-node", "4"], 4, 1),
    (["--nodes=2", "--gpus-per-node=4"], 8, 2),  # 2 x 4
    (["-N2", "--gres=gpu:4"], 8, 2),
    (["-G", "8", "-N", "2"], 8, 2),
    (["-G", "16"], 16, 4),  # no -N: the placement's node count
    (["-N", "2-2", "-G", "8"], 8, 2),  # a range of one count is that count
    (["--gpus-per-task=1", "--ntasks-per-node=4", "-N", "2"], 8, 2),  # 1 x 4 tasks x 2 nodes
    (["--gpus-per-task=2", "-n", "2"], 4, 1),  # 2 x 2 tasks
    (["--gpus-per-task=2"], 2, 1),  # one task by default
    (["-G", "4", "--gpus-per-node=4", "--gres=gpu:4"], 4, 1),  # all agree
    (["--gpu-bind=none", "-G", "2"], 2, 1),
    (["-G", "2", "-G", "2"], 2, 1),  # repeated with the same value
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_sbatch_gpu_spellings_become_the_gpu_count(argv, gpus, nodes):
    sub = submit([*argv, "-t", "5"])
    assert (sub.meta.num_gpus, sub.nodes) == (gpus, nodes)
    tasks = [a for i, a in enumerate(argv) if "ntasks" in a or a == "-n" or (i and argv[i - 1] == "-n")]
    assert sub.sbatch_args == (*tasks, "-t", "5")  # translated options never reach Slurm; task options do


@pytest.mark.parametrize("argv,message", [
    (["-G", "2", "--gpus-per-node=4"], r"conflicting GPU requests: -G 2 asks for 2 GPU\(s\), --gpus-per-node=4 for 4"),
    (["-G", "4", "--gres=gpu:4", "-N", "2"], "conflicting GPU requests"),
    (["--gpus-per-task=1", "-n", "3", "-G", "4"], "conflicting GPU requests"),
    (["-G", "2", "-G", "4"], "conflicting values: -G 2 and -G 4"),
    (["-N", "2", "--gpus-per-node=2"], r"-N 2: tesserae runs 4 GPU\(s\) on 1 node\(s\).*ask for 8 GPUs"),
    (["-N", "2"], r"-N 2: tesserae runs 1 GPU\(s\) on 1 node"),
    (["-N", "1", "-G", "8"], r"-N 1: tesserae runs 8 GPU\(s\) on 2 node\(s\)"),
    (["-N", "1-2", "-G", "2"], "range of node counts"),
    (["-N", "0"], "at least 1"),
    (["-G", "0"], "-G 0: must be at least 1"),
    (["--gpus=two"], "--gpus=two: expected .*whole number"),
    (["--gres=gpu:h100:2"], "--gres=gpu:h100:2: partition 'tesserae' has no h100 GPUs"),
    (["--gpus=v100:1"], r"has no v100 GPUs \(it has a100\)"),
    (["--gres=gpu:0"], r"--gres=gpu:0: must be at least 1"),
    (["--gpus-per-task=1", "-n", "0"], r"-n 0: must be at least 1"),
    (["--gpus-per-task=1", "--ntasks-per-node=2", "-N", "2", "-G", "2"],
     r"-G 2 asks for 2 GPU\(s\), -N 2 --ntasks-per-node=2 --gpus-per-task=1 for 4"),  # names every option it read
    (["--gres=shard:2"], r"only gpu GRES is translated \('shard:2' is not\); tesserae jobs hold no Slurm GRES"),
    (["--gres=gpu:1,mps:50"], "only gpu GRES"),
    (["--gres=gpu:1,gpu:2"], "one gpu entry"),
    (["--gres=gpu:a:b:2"], "expected gpu, gpu:N or gpu:TYPE:N"),
    (["--gpus=a100:1,v100:1"], "one GPU type"),
    (["--gpu-bind=closest"], "only --gpu-bind=none"),
    (["--gpus-per-task=1", "-n", "x"], "-n x: expected a whole number"),
    (["-N", "2", "--gpus-per-node=3"], "-N 2 --gpus-per-node=3: 6 GPUs: the GPU count must be a power of two"),
    (["-G", "32"], "-G 32: 32 GPUs: the managed partition has at most 16 GPUs"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_requests_the_daemon_cannot_honour_are_refused(argv, message):
    with pytest.raises(InputError, match=message):
        submit(argv)


def test_a_gpu_type_is_refused_where_tesserae_picks_the_type():
    assert submit(["-G", "4"], shape=MIXED).meta.num_gpus == 4
    with pytest.raises(InputError, match="chooses the GPU type .*a100, v100.* drop the type"):
        submit(["--gres=gpu:a100:2"], shape=MIXED)


PERLMUTTER = """#!/bin/bash
#SBATCH -N 2 --gpus-per-node=4 -t 10   # two full nodes
#SBATCH -J "my job" --ntasks-per-node=4
# not a directive
#SBATCH --gres gpu:4
srun python train.py  # -N 1 here is not a directive
#SBATCH -G 1
"""


def test_header_options_are_translated_and_cut_out_of_the_submitted_copy():
    sub = submit([], PERLMUTTER)
    assert (sub.meta, sub.nodes) == (JobMeta(8, no_profile=True), 2)
    assert sub.gpus_from == "-N 2 --gpus-per-node=4 --gres gpu:4 (job.sh #SBATCH)"
    assert sub.script_text == PERLMUTTER.replace(
        "#SBATCH -N 2 --gpus-per-node=4 -t 10   # two full nodes",
        "#SBATCH    -t 10   # two full nodes  # tsbatch translated: -N 2 --gpus-per-node=4").replace(
        "#SBATCH --gres gpu:4", "#SBATCH  # tsbatch translated: --gres gpu:4")
    assert [t.text for t in header_tokens(sub.script_text)] == ["-t", "10", "-J", "my job", "--ntasks-per-node=4"]
    assert submit([], PLAIN).script_text is None  # nothing translated in the header: the script goes as it is


def test_the_command_line_overrides_the_header_option_by_option():
    sub = submit(["-N", "1", "--gpus-per-node=2", "--gres=gpu:2"], PERLMUTTER)
    assert (sub.meta.num_gpus, sub.nodes) == (2, 1)
    assert "#SBATCH --gres" not in sub.script_text and "--gpus-per-node=4 -t" not in sub.script_text
    with pytest.raises(InputError, match=r"-G 2 asks for 2 GPU\(s\), -N 2 --gpus-per-node=4 \(job.sh #SBATCH\) for 8"):
        submit(["-G", "2"], PERLMUTTER)


@pytest.mark.parametrize("line,tokens", [
    ('#SBATCH -J "a b" --time=5 # c', ["-J", "a b", "--time=5"]),
    ("#SBATCH -J 'a b'#c", ["-J", "a b"]),
    ("#SBATCH -J a\\ b", ["-J", "a b"]),
    ('#SBATCH --comment="x#y"', ["--comment=x#y"]),
    ("#SBATCH", []),
    ("#SLURM -t 5", ["-t", "5"]),
    ("  #SBATCH -t 5", []),  # sbatch reads the magic word at the start of a line only
])
def test_header_tokens_follow_sbatchs_quoting(line, tokens):
    assert [t.text for t in header_tokens(f"#!/bin/sh\n{line}\n")] == tokens


def test_unmatched_quote_in_the_header_is_one_line():
    with pytest.raises(InputError, match="#SBATCH line 2: unmatched"):
        header_tokens('#!/bin/sh\n#SBATCH -J "oops\n')


@pytest.mark.parametrize("spec,nodes", [
    ("2x4:a100", (("a100", 4),) * 2),
    ("1x8", (("a100", 8),)),  # the config's GPU type
    ("2x1", (("a100", 1),) * 2),  # nodes of one GPU
    ("1x4:V100,1x8:a100", (("v100", 4), ("a100", 8))),
])
def test_cluster_shape(spec, nodes):
    assert cluster_shape(spec, "a100") == PartitionShape(nodes)


@pytest.mark.parametrize("spec", ["2x", "x4", "0x4", "2x0", "2*4", "2x4:"])
def test_bad_cluster_shape(spec):
    with pytest.raises(InputError, match="--cluster"):
        cluster_shape(spec, "a100")


def test_help_names_every_refused_option_with_its_reason_and_the_rules(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for name, reason in REFUSED.items():
        assert f"--{name}" in out and reason.split(":")[0] in " ".join(out.split()), name
    for rule in ("power of two", "whole nodes", "--gres=gpu[:TYPE][:N]", "-N, --nodes", "--dry-run", "--cluster"):
        assert rule in out, rule
    assert main(["--model", "x", "-h"]) == 0  # -h anywhere before the script


@pytest.fixture
def no_config(monkeypatch, tmp_path):
    """Built-in defaults, whatever this machine has in /etc or the environment."""
    cfg = tmp_path / "tesserae.yaml"
    cfg.write_text("slurm:\n  partition: tesserae\n")
    monkeypatch.setenv("TESSERAE_CONFIG", str(cfg))
    monkeypatch.setenv("PATH", str(tmp_path))  # no sinfo, no sbatch: a dry run with --cluster needs neither
    return tmp_path


def test_dry_run_without_slurm_prints_argv_metadata_and_script(no_config, capsys):
    script = no_config / "job.sh"
    script.write_text(PERLMUTTER)
    assert main(["--dry-run", "--cluster", "2x4:a100", "--no-profile", "-o", "o $x", str(script), "a b"]) == 0
    out = capsys.readouterr().out
    assert "checks: passed against 2 node(s) [a100:4] (--cluster 2x4:a100)" in out
    assert 'metadata: tesserae:v1:{"g":8,"nprof":true}' in out
    assert (f"argv: sbatch --parsable --partition=tesserae --hold --requeue --open-mode=append --signal=B:USR1@90 "
            f"'--comment=tesserae:v1:{{\"g\":8,\"nprof\":true}}' --nodes=2 -o 'o $x' {script} 'a b'") in out
    assert "  #SBATCH  # tsbatch translated: --gres gpu:4" in out and "srun python" not in out


@pytest.mark.parametrize("argv,message", [
    (["--cluster", "2x4", "--no-profile"], "--cluster describes a cluster for --dry-run only"),
    (["--dry-run", "--cluster", "2x4", "--no-profile", "-N", "2"], "-N 2: tesserae runs 1 GPU"),
    (["--dry-run", "--cluster", "2x4", "--no-profile", "-G", "16"], "at most 8 GPUs"),
    (["--dry-run", "--cluster", "2x4:v100", "--no-profile", "--gres=gpu:a100:1"], "has no a100 GPUs"),
])
def test_dry_run_refusals_are_one_line(no_config, capsys, argv, message):
    script = no_config / "job.sh"
    script.write_text(PLAIN)
    assert main([*argv, str(script)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tsbatch: error: ") and message in err[0], err


def test_dry_run_without_slurm_or_shape_says_how(no_config, capsys):
    script = no_config / "job.sh"
    script.write_text(PLAIN)
    assert main(["--dry-run", "--no-profile", str(script)]) == 1  # PATH has no sinfo
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "sinfo" in err[0] and "--dry-run --cluster NODESxGPUS[:TYPE]" in err[0], err


@pytest.mark.parametrize("profile,model,batches", [
    ("a100", "resnet50", "32, 64, 128"),
    ("gavel", "ResNet-50", "16, 32, 64, 128"),  # job types that carry their batch in the name, as a family
])
def test_a_missing_batch_size_is_named_with_the_profiles_batches(no_config, capsys, profile, model, batches):
    (no_config / "tesserae.yaml").write_text(f"slurm:\n  partition: tesserae\nscheduler:\n  profile: {profile}\n")
    assert main(["--dry-run", "--cluster", "2x4", "--model", model, "--wrap", "true"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"tsbatch: error: --model {model} needs --batch-size: profile {profile} has {model} with batch "
                   f"sizes {batches} (tsbatch --list-models lists every model)"]


def test_list_models_prints_every_model_with_its_batches_and_gpu_counts(no_config, capsys):
    from tesserae_slurm.site.partition import scheduling_profile

    assert main(["--list-models"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "profile a100 (scheduler.profile in " + str(no_config / "tesserae.yaml") + "):"
    rows = {line.split()[0]: line for line in out[2:-1]}
    ix = scheduling_profile("a100").index
    assert set(rows) == {m for m in ix.model_order if m != "(no profile)"}
    for m, line in rows.items():  # each model as --model takes it, with what the profile measured
        assert ",".join(map(str, ix.gpu_counts[m])) == line.split()[-1]
        assert all(b in line for b in ix.batches[m])
    assert "none needed: a global batch of 512 in micro-batches of 8 (512/8)" in rows["GPT2-Medium"]
    assert "32, 64, 128" in rows["resnet50"]
    # every batch it lists is one tsbatch takes
    assert main(["--dry-run", "--cluster", "2x4", "--model", "vgg19", "--batch-size", "64", "--wrap", "true"]) == 0
