"""tsbatch without Slurm: argv splitting, refusals, validation against the partition and the profile."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tesserae_slurm.model import InputError
from tesserae_slurm.model.meta import UNPROFILED, JobMeta
from tesserae_slurm.site.job_rules import check_meta
from tesserae_slurm.site.partition import PartitionShape, scheduling_profile
from tesserae_slurm.tsbatch.options import (
    Submission,
    build_meta,
    check_sbatch_options,
    make_submission,
    parse_argv,
    sbatch_args,
    script_directives,
)

SHAPE = PartitionShape((("a100", 4),) * 4)  # 4 nodes x 4 A100
PROFILE = scheduling_profile("a100")


@pytest.mark.parametrize("argv,own,sbatch,script", [
    (["--model", "m", "-G", "2", "run.sh", "x", "--model", "9"], {"--model": "m"}, ["-G", "2"],
     ["run.sh", "x", "--model", "9"]),
    (["-J", "name", "-t", "10", "run.sh"], {}, ["-J", "name", "-t", "10"], ["run.sh"]),
    (["-Jname", "--time=10", "--mem", "4G", "run.sh"], {}, ["-Jname", "--time=10", "--mem", "4G"], ["run.sh"]),
    (["-Q", "-v", "--requeue", "run.sh"], {}, ["-Q", "-v", "--requeue"], ["run.sh"]),
    (["--model=DCGAN", "--no-pack", "-o", "out-%j", "--", "-script-with-dash"],
     {"--model": "DCGAN", "--no-pack": True}, ["-o", "out-%j"], ["-script-with-dash"]),
    (["--wrap", "echo hi"], {}, ["--wrap", "echo hi"], []),
], ids=["own-options-stop-at-script", "short-with-values", "attached-values", "flags", "double-dash", "wrap"])
def test_argv_is_split_where_sbatch_would(argv, own, sbatch, script):
    assert parse_argv(argv) == (own, sbatch, script)


@pytest.mark.parametrize("argv,message", [
    (["--gpus"], "needs a value"),
    (["--frob", "x.sh"], "unknown option --frob"),
    (["-Z", "x.sh"], "unknown option -Z"),
    (["--hold=yes", "x.sh"], "takes no value"),
    (["--model", "a", "--model", "b", "x.sh"], "given twice"),
], ids=["missing-value", "unknown-long", "unknown-short", "flag-with-value", "twice"])
def test_argv_errors(argv, message):
    with pytest.raises(InputError, match=message):
        parse_argv(argv)


@pytest.mark.parametrize("tokens,message", [
    (["--cpus-per-gpu=4"], "--cpus-per-gpu is not allowed.*--cpus-per-task"), (["--mem-per-gpu", "8G"], "--mem"),
    (["--gpus-per-socket=1"], "not allowed"), (["--ntasks-per-gpu=1"], "--ntasks"), (["-w", "node1"], "--nodelist"),
    (["--exclusive"], "--exclusive"), (["--no-requeue"], "requeueable"), (["--comment", "c"], "metadata"),
    (["--signal=USR2@60"], "checkpoint signal"), (["-a", "1-3"], "--array"), (["-d", "afterok:1"], "dependencies"),
    (["-p", "other"], "managed partition"), (["--open-mode", "truncate"], "append"),
], ids=lambda v: v if isinstance(v, str) else " ".join(v))
def test_sbatch_options_that_fight_the_daemon_are_refused(tokens, message):
    with pytest.raises(InputError, match=message):
        check_sbatch_options(tokens, "tesserae")


def test_allowed_sbatch_options_pass():
    check_sbatch_options(["-p", "tesserae", "--partition=tesserae", "-t", "60", "-c", "4", "--mem=8G", "-J", "x",
                          "--open-mode=append", "--requeue", "-o", "o.txt", "--export=ALL"], "tesserae")


def test_script_header_is_read_like_sbatch_reads_it():
    text = ("#!/bin/bash\n# a comment\n#SBATCH -J x --time=5  # trailing\n\n#SBATCH --cpus-per-gpu=1\necho\n"
            "#SBATCH -w n1\n")
    assert script_directives(text) == ["-J", "x", "--time=5", "--cpus-per-gpu=1"]  # stops at the first command
    with pytest.raises(InputError, match="s.sh #SBATCH: sbatch option --cpus-per-gpu"):
        check_sbatch_options(script_directives(text), "tesserae", where="s.sh #SBATCH")


@pytest.mark.parametrize("gpus,ok", [("1", True), ("2", True), ("4", True), ("8", True), ("16", True),
                                     ("3", False), ("6", False), ("32", False)])  # 0 and -2: test_tsbatch_gpus
def test_gpu_count_is_a_power_of_two_within_the_partition(gpus, ok):
    own = {"--no-profile": True}
    if ok:
        assert build_meta(own, int(gpus), SHAPE, PROFILE).num_gpus == int(gpus)
    else:
        with pytest.raises(InputError, match="--gpus"):
            build_meta(own, int(gpus), SHAPE, PROFILE)


def test_multi_node_jobs_need_whole_nodes_of_odd_sizes():
    shape = PartitionShape((("a100", 6),) * 4)
    assert build_meta({"--no-profile": True}, 4, shape, PROFILE).num_gpus == 4
    with pytest.raises(InputError, match="whole nodes"):
        build_meta({"--no-profile": True}, 8, shape, PROFILE)


def test_capacity_counts_one_gpu_type():
    shape = PartitionShape((("a100", 4), ("a100", 4), ("v100", 4), ("v100", 4)))
    assert shape.capacity == 8
    with pytest.raises(InputError, match="at most 8 GPUs of one type"):
        build_meta({"--no-profile": True}, 16, shape, PROFILE)


@pytest.mark.parametrize("own,expect", [
    ({"--gpus": "1", "--model": "resnet50", "--batch-size": "64"}, JobMeta(1, "resnet50", "64")),
    ({"--gpus": "2", "--model": "gpt2_medium", "--parallelism": "10,14; TP24"},
     JobMeta(2, "gpt2_medium", "", ("10,14", "TP24"))),
    ({"--gpus": "1", "--no-profile": True, "--no-pack": True}, JobMeta(1, no_pack=True, no_profile=True)),
])
def test_valid_metadata(own, expect):
    own = dict(own)  # not the shared parameter: the test may run more than once in one process
    assert build_meta(own, int(own.pop("--gpus")), SHAPE, PROFILE) == expect


@pytest.mark.parametrize("own,message", [
    ({"--gpus": "1"}, "--model is required"),
    ({"--gpus": "1", "--model": "NoSuch"}, "unknown model 'NoSuch'.*--no-profile"),
    ({"--gpus": "1", "--model": UNPROFILED}, "unknown model"),
    ({"--gpus": "1", "--model": "resnet50", "--batch-size": "3"}, "unknown batch size"),
    ({"--gpus": "1", "--no-profile": True, "--batch-size": "3"}, "drop --model"),
    ({"--gpus": "2", "--model": "GPT2-Medium", "--parallelism": "10,14;;TP24"}, "separated by ';'"),
    ({"--gpus": "2", "--model": "GPT2-Medium", "--parallelism": "9,9,9"}, "does not divide"),
    ({"--gpus": "2", "--model": "GPT2-Medium", "--parallelism": "11,13"}, "unknown strategy"),
    ({"--gpus": "1", "--model": "resnet50", "--batch-size": "64", "--parallelism": "TP24"}, "no parallelism"),
    ({"--gpus": "1", "--model": "Bert-Large", "--batch-size": "999"}, "a global batch of 256 in micro-batches of 16"),
])
def test_invalid_metadata(own, message):
    with pytest.raises(InputError, match=message):
        own = dict(own)
        build_meta(own, int(own.pop("--gpus")), SHAPE, PROFILE)


def test_submission_and_sbatch_arguments_golden():
    own, sb, script = parse_argv(["--gpus", "8", "--model", "DCGAN", "--batch-size", "32", "-J", "a b;c",
                                  "--parsable", "job.sh", "$(x)"])
    sub = make_submission(own, sb, script, "tesserae", "#!/bin/bash\n#SBATCH -t 5\n", SHAPE, PROFILE)
    assert sub == Submission(JobMeta(8, "DCGAN", "32"), ("-J", "a b;c"), ("job.sh", "$(x)"), nodes=2, parsable=True,
                             gpus_from="--gpus 8")
    assert sbatch_args(sub, "tesserae", "USR1", 90) == [
        "--partition=tesserae", "--hold", "--requeue", "--open-mode=append", "--signal=B:USR1@90",
        '--comment=tesserae:v1:{"b":"32","g":8,"m":"DCGAN"}', "--nodes=2", "-J", "a b;c"]


def test_wrap_or_script_but_not_both():
    with pytest.raises(InputError, match="either --wrap or a script"):
        make_submission({"--no-profile": True}, ["--wrap", "x"], ["s.sh"], "tesserae", None, SHAPE, PROFILE)
    with pytest.raises(InputError, match="missing batch script"):
        make_submission({"--no-profile": True}, [], [], "tesserae", None, SHAPE, PROFILE)


@given(st.integers(1, 64), st.sampled_from(["", "resnet50", "GPT2-Medium"]), st.text(max_size=8),
       st.lists(st.text(min_size=1, max_size=6), max_size=3), st.booleans())
def test_meta_roundtrips_through_the_comment(n, model, batch, par, no_pack):
    meta = JobMeta(n, model, batch, tuple(par), no_pack, no_profile=not model)
    text = meta.encode()
    assert "\n" not in text and JobMeta.decode(text) == meta


def test_a_comment_read_again_gives_the_same_metadata_and_a_malformed_one_fails_each_time():
    """The daemon reads every job's Comment each round; what it remembers must be what it read."""
    text = JobMeta(2, "DCGAN", "32").encode()
    assert JobMeta.decode(text) == JobMeta.decode(text) == JobMeta(2, "DCGAN", "32")
    assert JobMeta.decode(JobMeta(4, "DCGAN", "32").encode()).num_gpus == 4
    for _ in range(2):
        with pytest.raises(InputError, match="malformed tesserae job comment"):
            JobMeta.decode('tesserae:v1:{"g":"2"}')
    assert JobMeta(1, "DCGAN", "32").job("7", "u", account="ml").account == "ml"
    assert JobMeta(1, no_profile=True).job("7", account="ml").account == "ml"


def test_llm_batch_is_optional_but_must_be_the_profiles_when_given():
    assert build_meta({"--model": "Bert-Large"}, 1, SHAPE, PROFILE).batch_size == ""
    assert build_meta({"--model": "Bert-Large", "--batch-size": "256/16"}, 1, SHAPE, PROFILE)


@pytest.mark.parametrize("comment,message", [
    ('tesserae:v1:{"g":3,"m":"DCGAN","b":"32"}', "power of two"),
    ('tesserae:v1:{"g":6,"nprof":true}', "power of two"),
    ('tesserae:v1:{"g":32,"nprof":true}', "at most 16 GPUs"),
    ('tesserae:v1:{"g":1,"m":"Bert-Large","b":"999"}', "fixes Bert-Large's batch by GPU count"),
    ('tesserae:v1:{"g":1,"m":"DCGAN","b":"7"}', "unknown batch size"),
    ('tesserae:v1:{"g":2,"m":"GPT2-Medium","p":["9,9,9"]}', "does not divide"),
    ('tesserae:v1:{"g":1,"nprof":true,"b":"32"}', "drop --model"),
])
def test_hand_written_comments_meet_tsbatchs_rules(comment, message):
    """The daemon's check (check_meta) is tsbatch's: what tsbatch refuses, a hand-written Comment cannot do."""
    meta = JobMeta.decode(comment)
    with pytest.raises(InputError, match=message):
        check_meta(meta, SHAPE, PROFILE)


@pytest.mark.parametrize("text", ['tesserae:v1:{"g":1,"m":"DCGAN","b":"32","np":"no"}',
                                  'tesserae:v1:{"g":1,"nprof":1}', 'tesserae:v1:{"g":1,"m":5}',
                                  'tesserae:v1:{"g":1,"nprof":true,"extra":1}'])
def test_comment_fields_have_the_types_tsbatch_writes(text):
    with pytest.raises(InputError, match="malformed"):
        JobMeta.decode(text)


@pytest.mark.parametrize("text", ["tesserae:v1:{", "tesserae:v1:[]", 'tesserae:v1:{"g":"2"}', "tesserae:v1:{}",
                                  'tesserae:v1:{"g":1,"m":"x","nprof":true}', "other"])
def test_malformed_comments_are_input_errors(text):
    with pytest.raises(InputError):
        JobMeta.decode(text)


def test_no_profile_jobs_run_alone_at_full_speed_and_never_pack():
    job = JobMeta(4, no_profile=True).job("7")
    assert job.model == UNPROFILED and job.no_pack
    assert PROFILE.best_isolated(job, "a100") == (1.0, None)
    assert PROFILE.best_pair(job, JobMeta(4, no_profile=True).job("8"), "a100") is None
