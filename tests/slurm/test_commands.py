"""argv builders: exact argv (golden), and bad input refused with one clear line."""

from __future__ import annotations

import signal

import pytest

from tesserae_slurm.model import InputError
from tesserae_slurm.slurm import commands

NASTY = "x$(touch /tmp/pwned);`id` 'q' \"d\" & | > end"


@pytest.mark.parametrize(
    "argv, expected",
    [
        (commands.squeue_json(), ["squeue", "--json", "--states=all"]),
        (commands.squeue_poll("tesserae"), ["squeue", "-h", "-p", "tesserae", "-o", "%i %t"]),
        (commands.squeue_job_states(), ["squeue", "-h", "--only-job-state", "-o", "%i %t"]),
        (commands.sinfo_json(), ["sinfo", "--json"]),
        (commands.scontrol_ping(), ["scontrol", "ping"]),
        (
            commands.sbatch(["/x/job.sh", "a b"], ["--hold", "-J", "n"]),
            ["sbatch", "--parsable", "--hold", "-J", "n", "/x/job.sh", "a b"],
        ),
        (commands.sbatch(), ["sbatch", "--parsable"]),
        (
            commands.scontrol_place(7, ["node3"]),
            ["scontrol", "update", "JobId=7", "NodeList=node3", "StartTime=now"],
        ),
        (
            commands.scontrol_place("8", ["node1", "node2"], {"Comment": "tesserae r3", "AdminComment": "{}"}),
            ["scontrol", "update", "JobId=8", "NodeList=node1,node2", "StartTime=now", "Comment=tesserae r3", "AdminComment={}"],
        ),
        (commands.scontrol_nodes_json(), ["scontrol", "show", "node", "--json"]),
        (commands.scontrol_release([5, 6, 7]), ["scontrol", "release", "5,6,7"]),
        (commands.scontrol_requeuehold(9), ["scontrol", "requeuehold", "9"]),
        (commands.scontrol_requeuehold_incomplete([9]), ["scontrol", "requeuehold", "Incomplete", "9"]),
        (commands.scontrol_requeuehold_incomplete([9, 11]), ["scontrol", "requeuehold", "Incomplete", "9,11"]),
        (commands.scontrol_admin_hold([5, 6]), ["scontrol", "hold", "5,6"]),
        (commands.scancel(9), ["scancel", "9"]),
        (commands.scancel_signal([9], "USR1"), ["scancel", "--signal=USR1", "--batch", "9"]),
        (commands.scancel_signal([9, 11, 12], "USR1"), ["scancel", "--signal=USR1", "--batch", "9", "11", "12"]),
        (commands.scancel_signal([9], signal.SIGTERM, batch_only=False), ["scancel", "--signal=TERM", "--full", "9"]),
        (commands.squeue_brief([4, 7]),
         ["squeue", "--noheader", "--states=all", "--jobs=4,7", "--Format=JobId:0|,State:0|,UserName:0|,"
          "RestartCnt:0|,StartTime:0|,EndTime:0|,exit_code:0|,NodeList:0|"]),
    ],
    ids=[
        "squeue", "squeue-poll", "squeue-job-states", "sinfo", "ping", "sbatch-argv", "sbatch-stdin", "place", "place-extra",
        "scontrol-nodes", "release-many", "requeuehold", "requeuehold-incomplete", "requeuehold-many", "admin-hold",
        "cancel", "signal-batch", "signal-many", "signal-full", "squeue-brief",
    ],
)
def test_argv(argv, expected):
    assert argv == expected


def test_metacharacters_stay_one_argv_item():
    argv = commands.scontrol_update_job(3, {"Comment": NASTY})
    assert argv[-1] == f"Comment={NASTY}" and len(argv) == 4


@pytest.mark.parametrize(
    "sig, expected",
    [("USR1", "USR1"), ("SIGUSR1", "USR1"), ("usr2", "USR2"), (signal.SIGUSR1, "USR1"), (15, "TERM"), ("9", "KILL")],
    ids=["name", "sig-name", "lower", "enum", "int", "digit-string"],
)
def test_signal_name(sig, expected):
    assert commands.signal_name(sig) == expected


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: commands.scancel(0), "positive integer"),
        (lambda: commands.scancel("12; rm -rf /"), "invalid Slurm job id"),
        (lambda: commands.scancel(True), "invalid Slurm job id"),
        (lambda: commands.scontrol_release([]), "no job ids"),
        (lambda: commands.scontrol_place(1, []), "empty node list"),
        (lambda: commands.scontrol_place(1, "node1"), "list of names"),
        (lambda: commands.scontrol_place(1, ["node1 JobId=2"]), "invalid node name"),
        (lambda: commands.scontrol_place(1, ["node1"], {"StartTime": "later"}), "conflicts"),
        (lambda: commands.scontrol_update_job(1, {"Comment x": "y"}), "invalid scontrol update key"),
        (lambda: commands.scontrol_update_job(1, {"Comment": "a\nJobId=2"}), "one line"),
        (lambda: commands.scontrol_update_job(1, {}), "nothing to update"),
        (lambda: commands.scancel_signal([1], "NOPE"), "unknown signal"),
        (lambda: commands.scancel_signal([], "USR1"), "no job ids"),
        (lambda: commands.scancel_signal([1, "2; id"], "USR1"), "invalid Slurm job id"),
        (lambda: commands.scontrol_requeuehold_incomplete([]), "no job ids"),
        (lambda: commands.squeue_brief([]), "no job ids"),
        (lambda: commands.sbatch("job.sh"), "lists of strings"),
    ],
    ids=[
        "zero-id", "injected-id", "bool-id", "release-empty", "no-nodes", "nodes-string", "node-with-space",
        "place-conflict", "bad-key", "multiline-value", "no-updates", "bad-signal", "signal-empty", "signal-injected-id",
        "requeuehold-empty", "brief-empty", "sbatch-string",
    ],
)
def test_bad_input_raises_input_error(call, match):
    with pytest.raises(InputError, match=match):
        call()
