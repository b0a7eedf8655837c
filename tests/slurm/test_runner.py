"""The subprocess seam, driven with tiny fake Slurm commands (shell scripts in tmp): offline, fast.

The fakes count their invocations in a file, so retries are observed, not assumed; `sleep` is
injected so backoff is checked without waiting.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tesserae_slurm.slurm.runner import (
    RetryPolicy,
    SlurmCommandError,
    SlurmRunner,
    SlurmUnavailable,
    is_transient,
    one_line,
)

NASTY = "x$(touch PWNED);`touch PWNED` 'q' \"d\" & | > end"


def fake(tmp_path: Path, name: str, body: str) -> Path:
    """A fake command that appends one line to calls.log per run, then runs `body` (sh)."""
    path = tmp_path / name
    path.write_text(f'#!/bin/sh\necho x >> "{tmp_path}/calls.log"\n{body}\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def calls(tmp_path: Path) -> int:
    log = tmp_path / "calls.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def runner(retries: int = 1, timeout_s: float = 5.0, env=None):
    sleeps: list[float] = []
    r = SlurmRunner(env, timeout_s=timeout_s, retry=RetryPolicy(retries=retries, backoff_s=0.5), sleep=sleeps.append)
    return r, sleeps


def test_success_returns_stdout(tmp_path):
    cmd = fake(tmp_path, "squeue", "echo hello")
    r, sleeps = runner()
    assert r.run([str(cmd)]) == "hello\n"
    assert calls(tmp_path) == 1 and sleeps == []


@pytest.mark.parametrize("retries, expected_sleeps", [(0, []), (1, [0.5]), (3, [0.5, 1.0, 2.0])], ids=["none", "one", "three"])
def test_transient_failure_is_retried_with_backoff(tmp_path, retries, expected_sleeps):
    cmd = fake(tmp_path, "squeue", 'echo "slurm_load_jobs error: Unable to contact slurm controller (connect failure)" >&2; exit 1')
    r, sleeps = runner(retries=retries)
    with pytest.raises(SlurmUnavailable, match="Unable to contact slurm controller"):
        r.run([str(cmd), "-h"])
    assert calls(tmp_path) == retries + 1
    assert sleeps == expected_sleeps


def test_transient_then_success(tmp_path):
    cmd = fake(
        tmp_path,
        "sinfo",
        f'if [ "$(wc -l < "{tmp_path}/calls.log")" -lt 2 ]; then echo "Socket timed out on send/recv" >&2; exit 1; fi\necho ok',
    )
    r, sleeps = runner(retries=2)
    assert r.run([str(cmd)]) == "ok\n"
    assert calls(tmp_path) == 2 and sleeps == [0.5]


def test_invalid_job_id_is_not_retried(tmp_path):
    cmd = fake(tmp_path, "scontrol", 'echo "Invalid job id specified for job 999" >&2\necho "slurm_suspend error: Invalid job id specified" >&2; exit 1')
    r, sleeps = runner(retries=3)
    with pytest.raises(SlurmCommandError) as info:
        r.run([str(cmd), "release", "999"])
    assert calls(tmp_path) == 1 and sleeps == []
    assert str(info.value) == "scontrol release: Invalid job id specified for job 999 | slurm_suspend error: Invalid job id specified"
    assert info.value.returncode == 1 and "\n" not in str(info.value)


def test_timeout_counts_as_transient(tmp_path):
    cmd = fake(tmp_path, "squeue", "exec sleep 5")
    r, sleeps = runner(retries=1, timeout_s=0.3)
    with pytest.raises(SlurmUnavailable, match="timed out after 0.3s"):
        r.run([str(cmd)])
    assert calls(tmp_path) == 2 and sleeps == [0.5]


def test_missing_binary_is_unavailable_without_retry(tmp_path):
    r, sleeps = runner(retries=3)
    with pytest.raises(SlurmUnavailable, match="command not found"):
        r.run([str(tmp_path / "no-such-squeue")])
    assert sleeps == []


def test_env_is_laid_over_process_env_and_stdin_is_passed(tmp_path):
    cmd = fake(tmp_path, "sbatch", 'echo "$SLURM_CONF|$EXTRA|$PATH"; cat')
    r, _ = runner(env={"SLURM_CONF": "/x/slurm.conf"})
    out = r.run([str(cmd)], env={"EXTRA": "1"}, input_text="#!/bin/sh\ntrue\n")
    first, rest = out.split("\n", 1)
    conf, extra, path = first.split("|")
    assert (conf, extra) == ("/x/slurm.conf", "1") and path  # PATH inherited
    assert rest == "#!/bin/sh\ntrue\n"


def test_arguments_arrive_verbatim_and_run_nothing(tmp_path):
    cmd = fake(tmp_path, "sbatch", 'printf "%s" "$1"')
    r, _ = runner()
    assert r.run([str(cmd), NASTY]) == NASTY
    assert not (tmp_path / "PWNED").exists() and not Path("PWNED").exists()


@pytest.mark.parametrize(
    "stderr, transient",
    [
        ("squeue: error: Unable to contact slurm controller (connect failure)", True),
        ("Unexpected message received for job 3", True),
        ("Socket timed out on send/recv operation", True),
        ("Invalid job id specified for job 999", False),
        ("scancel: error: Kill job error on job id 6: Job can not be altered now, try again later", False),
        ("sbatch: error: Invalid generic resource (gres) specification", False),
    ],
    ids=["connect", "unexpected-msg", "socket-timeout", "invalid-id", "finished-job", "bad-gres"],
)
def test_is_transient(stderr, transient):
    assert is_transient(stderr) is transient


def test_one_line_collapses_and_truncates():
    assert one_line("a\n\n  b \n") == "a | b"
    assert len(one_line("x" * 1000)) == 300
