"""A stop's Slurm calls for several jobs at once: the squeue text that follows only the stopped jobs, the
refusals a multi-job scancel names, and what each backend does with a list where one job has ended.

The outputs are written from the clients' source (src/squeue/print.c, src/scancel/scancel.c and
src/scontrol/update_job.c of 22.05.8, 24.11.5 and 26.05, docs/slurm-versions.md); the live tests
(tests/daemon/test_stop_batch_live.py) run the same calls on a real Slurm.
"""

from __future__ import annotations

import types

import pytest

from tesserae_slurm.slurm import SlurmCliBackend, SlurmCommandError, SlurmJobState, SlurmRunner, commands, parse
from tesserae_slurm.slurm.parse import SlurmParseError
from tesserae_slurm.slurm.pyslurm_backend import PyslurmBackend

S = SlurmJobState

# ---- squeue --jobs --Format (commands.squeue_brief) -----------------------------------------------


def test_brief_lines_of_22_05_read_the_raw_wait_status_and_epoch_times():
    text = ("11|RUNNING|alice|2|1800000100|1800003700|0|node[1-2]|\n"
            "12|COMPLETED|bob|0|1800000000|1800000500|256|node3|\n"  # exit code 1 as a wait status
            "13|CANCELLED|bob|1|1800000000|1800000600|15|node4|\n"  # killed by SIGTERM
            "14|PENDING|carol|3|N/A|Unknown|0||\n")
    a, b, c, d = parse.parse_squeue_brief(text)
    assert (a.job_id, a.state, a.user, a.restart_count, a.nodes) == (11, S.RUNNING, "alice", 2, ("node1", "node2"))
    assert (a.start_time, a.end_time, a.exit_code) == (1800000100, None, None)  # a running job's end is its limit
    assert (b.state, b.end_time, b.exit_code, b.exit_signal, b.nodes) == (S.COMPLETED, 1800000500, 1, 0, ("node3",))
    assert (c.state, c.exit_code, c.exit_signal) == (S.CANCELLED, 0, 15)
    assert (d.state, d.start_time, d.end_time, d.nodes, d.restart_count) == (S.PENDING, None, None, (), 3)


def test_brief_lines_of_24_11_and_later_read_code_and_signal():
    text = ("21|FAILED|alice|0|1800000100|1800000200|3:0|node1|\n"
            "22|TIMEOUT|alice|0|1800000100|1800000200|0:9|node1|\n"
            "23|COMPLETED|alice|0|1800000100|1800000200||node1|\n"  # no exit code recorded (NO_VAL): empty
            "24|COMPLETING|alice|0|1800000100|1800000200|0:0|node1|\n")
    a, b, c, d = parse.parse_squeue_brief(text)
    assert (a.exit_code, a.exit_signal, b.exit_code, b.exit_signal) == (3, 0, 0, 9)
    assert (c.exit_code, c.exit_signal, c.end_time) == (None, None, 1800000200)
    assert d.state is S.COMPLETING and d.state.is_active and d.exit_code is None


def test_brief_is_empty_for_no_lines_and_refuses_what_it_cannot_read():
    assert parse.parse_squeue_brief("") == () and parse.parse_squeue_brief("\n\n") == ()
    for bad, match in (("11 RUNNING alice 0\n", "8 fields"), ("11|RUNNING|alice|0|1|2|0|node1\n", "8 fields"),
                       ("x|RUNNING|alice|0|1|2|0|node1|\n", "8 fields"),
                       ("11|DANCING|alice|0|1|2|0|node1|\n", "cannot read job_state"),
                       ("12|FAILED|alice|0|1|2|-2|node1|\n", "cannot read exit code")):
        with pytest.raises(SlurmParseError, match=match):
            parse.parse_squeue_brief(bad)


def test_scancel_refusals_name_the_jobs_or_say_they_cannot():
    stderr = ("scancel: error: Kill job error on job id 12: Invalid job id specified\n"
              "scancel: error: Kill job error on job id 14: Job/step already completing or completed\n")
    assert parse.parse_scancel_refusals(stderr) == {12: "Invalid job id specified",
                                                    14: "Job/step already completing or completed"}
    assert parse.parse_scancel_refusals("") == {}  # a job that ended under scancel is refused without a word
    assert parse.parse_scancel_refusals("slurm_load_jobs error: Access/permission denied\n") is None
    assert parse.parse_scancel_refusals(stderr + "scancel: fatal: something else\n") is None


# ---- the CLI backend ------------------------------------------------------------------------------


class ScriptedRunner:
    """Answers each argv from ``answers`` (argv[0] -> stdout, or the exception to raise); records argv and env."""

    def __init__(self, answers: dict[str, str | Exception]) -> None:
        self.answers = answers
        self.calls: list[tuple[list[str], dict[str, str] | None]] = []

    def run(self, argv, *, env=None, **kwargs):
        self.calls.append((list(argv), env))
        answer = self.answers[argv[0]]
        if isinstance(answer, Exception):
            raise answer
        return answer


def _refused(stderr: str) -> SlurmCommandError:
    return SlurmCommandError(f"scancel: {stderr.strip()}", returncode=1, stderr=stderr)


def test_cli_signals_every_job_in_one_scancel_and_returns_the_refused():
    runner = ScriptedRunner({"scancel": _refused("scancel: error: Kill job error on job id 12: "
                                                 "Invalid job id specified\n")})
    backend = SlurmCliBackend(runner=runner)  # type: ignore[arg-type]
    assert backend.signal([11, 12, 13], "USR1") == {12: "Invalid job id specified"}
    assert [argv for argv, _ in runner.calls] == [["scancel", "--signal=USR1", "--batch", "11", "12", "13"]]
    runner.answers["scancel"] = ""
    assert backend.signal([11, 13], "USR1") == {} and backend.signal([], "USR1") == {}
    assert len(runner.calls) == 2  # an empty list asks Slurm nothing


def test_cli_signal_raises_when_scancel_names_no_job():
    runner = ScriptedRunner({"scancel": _refused("slurm_load_jobs error: Access/permission denied\n")})
    backend = SlurmCliBackend(runner=runner)  # type: ignore[arg-type]
    with pytest.raises(SlurmCommandError, match="permission denied"):
        backend.signal([11, 12], "USR1")


def test_cli_requeue_holds_a_list_in_one_call():
    runner = ScriptedRunner({"scontrol": ""})
    backend = SlurmCliBackend(runner=runner)  # type: ignore[arg-type]
    backend.requeue_hold([11, 12, 13])
    backend.requeue_hold([])
    assert [argv for argv, _ in runner.calls] == [["scontrol", "requeuehold", "Incomplete", "11,12,13"]]


def test_cli_brief_listing_asks_for_epoch_times_and_tolerates_one_purged_job():
    runner = ScriptedRunner({"squeue": "11|RUNNING|alice|0|1800000100|1800003700|0|node1|\n"})
    backend = SlurmCliBackend(runner=runner)  # type: ignore[arg-type]
    (job,) = backend.list_jobs_brief([11, 12])
    assert job.job_id == 11 and job.start_time == 1800000100
    argv, env = runner.calls[0]
    assert argv == commands.squeue_brief([11, 12]) and env == {"SLURM_TIME_FORMAT": "%s"}
    # one id alone is looked up by itself: squeue fails once Slurm has forgotten it (MinJobAge)
    runner.answers["squeue"] = SlurmCommandError("squeue: slurm_load_jobs error: Invalid job id specified",
                                                 returncode=1, stderr="slurm_load_jobs error: Invalid job id specified")
    assert backend.list_jobs_brief([12]) == ()
    with pytest.raises(SlurmCommandError):
        backend.list_jobs_brief([12, 13])
    assert backend.list_jobs_brief([]) == () and len(runner.calls) == 3


# ---- the pyslurm backend: one RPC per job, the CLI's meaning --------------------------------------


def _pyslurm(ended: set[int]) -> tuple[PyslurmBackend, list[tuple[str, int]]]:
    """A pyslurm module whose raw calls refuse the ``ended`` jobs as libslurm does (ValueError(msg, errno))."""
    sent: list[tuple[str, int]] = []
    module = types.ModuleType("pyslurm")

    def call(what: str):
        def rpc(job_id: int, *args: int) -> int:
            sent.append((what, job_id))
            if job_id in ended:
                raise ValueError("Invalid job id specified", 2017)
            return 0
        return rpc
    module.slurm_kill_job = call("signal")  # type: ignore[attr-defined]
    module.slurm_requeue = call("requeue")  # type: ignore[attr-defined]
    cli = SlurmCliBackend(runner=SlurmRunner())
    cli._version = (24, 11)
    return PyslurmBackend(cli, module), sent


def test_pyslurm_signals_each_job_and_returns_the_refused():
    backend, sent = _pyslurm(ended={12})
    refused = backend.signal([11, 12, 13], "USR1")
    assert sent == [("signal", 11), ("signal", 12), ("signal", 13)]
    assert list(refused) == [12] and "Invalid job id" in refused[12]


def test_pyslurm_requeue_holds_every_job_then_raises_the_refusal():
    backend, sent = _pyslurm(ended={12})
    with pytest.raises(SlurmCommandError, match="requeue job 12: Invalid job id"):
        backend.requeue_hold([11, 12, 13])
    assert sent == [("requeue", 11), ("requeue", 12), ("requeue", 13)]
