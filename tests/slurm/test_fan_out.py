"""Per-job Slurm calls in flight at once (``slurm/fan_out.py``): each call's own outcome, in the order asked,
never more than the bound at a time; and through the CLI backend, real processes of a fake ``scontrol``
that log when each one runs, so the overlap and the bound are observed, not assumed."""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

import pytest

from tesserae_slurm.slurm import SlurmCliBackend, SlurmCommandError, SlurmRunner, SlurmUnavailable
from tesserae_slurm.slurm.fan_out import fan_out


class Gauge:
    """Counts the calls in flight and keeps the most seen at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = self.most = 0

    def __enter__(self) -> None:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)

    def __exit__(self, *exc: object) -> None:
        with self.lock:
            self.now -= 1


def test_results_come_back_in_the_order_asked_whatever_order_they_finish_in() -> None:
    def call(k: int) -> int:
        time.sleep(0.002 * (10 - k))  # the first asked finishes last
        return k * k

    assert fan_out(call, list(range(10)), 4) == [k * k for k in range(10)]
    assert fan_out(call, [], 4) == []


def test_a_failed_call_is_its_own_and_the_others_are_made() -> None:
    made: list[int] = []

    def call(k: int) -> str:
        made.append(k)
        if k in (2, 5):
            raise SlurmCommandError(f"job {k}: Invalid job id specified", returncode=1, stderr="Invalid job id")
        if k == 7:
            raise SlurmUnavailable("scontrol update: timed out after 10s")
        return f"ok {k}"

    for workers in (1, 3):
        made.clear()
        out = fan_out(call, list(range(9)), workers)
        assert sorted(made) == list(range(9))
        assert [type(o).__name__ if isinstance(o, Exception) else o for o in out] == [
            "ok 0", "ok 1", "SlurmCommandError", "ok 3", "ok 4", "SlurmCommandError", "ok 6", "SlurmUnavailable",
            "ok 8"]
        assert str(out[2]) == "job 2: Invalid job id specified"


@pytest.mark.parametrize("workers", [1, 3, 8])
def test_never_more_calls_in_flight_than_the_bound_and_as_many_as_it_allows(workers: int) -> None:
    gauge = Gauge()
    ready = threading.Barrier(workers, timeout=10)  # passes only once `workers` calls run at the same time

    def call(k: int) -> int:
        with gauge:
            if k < workers:
                ready.wait()
            time.sleep(0.01)
        return k

    assert fan_out(call, list(range(20)), workers) == list(range(20))
    assert gauge.most == workers


def test_one_worker_calls_in_this_thread_one_after_another() -> None:
    threads: set[str] = set()
    gauge = Gauge()

    def call(k: int) -> int:
        with gauge:
            threads.add(threading.current_thread().name)
            time.sleep(0.002)
        return k

    assert fan_out(call, [1, 2, 3], 1) == [1, 2, 3]
    assert threads == {threading.current_thread().name} and gauge.most == 1


def test_a_defect_is_raised_not_returned_and_a_bound_below_one_is_refused() -> None:
    def call(k: int) -> int:
        if k == 3:
            raise KeyError(k)
        return k

    for workers in (1, 4):
        with pytest.raises(KeyError):
            fan_out(call, list(range(6)), workers)
    with pytest.raises(ValueError, match="workers must be >= 1"):
        fan_out(call, [1], 0)


def _fake_scontrol(bin_dir: Path, log: Path) -> None:
    """`scontrol update JobId=N ...`: logs its start and end (monotonic ns from date), holds 0.3 s, refuses
    job 13 as 22.05 refuses a job it no longer knows."""
    path = bin_dir / "scontrol"
    path.write_text(f"""#!/bin/sh
job=""
for a in "$@"; do case "$a" in JobId=*) job="${{a#JobId=}}";; esac; done
echo "start $job $(date +%s%N)" >> "{log}"
sleep 0.3
echo "end $job $(date +%s%N)" >> "{log}"
if [ "$job" = 13 ]; then echo "slurm_update error: Invalid job id specified" >&2; exit 1; fi
""")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _most_at_once(lines: list[str]) -> int:
    # (time, -1) sorts before (time, 1): an end before a start at the same instant
    events = sorted((int(t), 1 if kind == "start" else -1) for kind, _, t in (ln.split() for ln in lines))
    now = most = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def test_the_cli_backends_places_overlap_up_to_the_bound_and_a_refused_job_fails_alone(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    _fake_scontrol(bin_dir, log)
    backend = SlurmCliBackend(runner=SlurmRunner({"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}))
    jobs = list(range(10, 18))
    out = fan_out(lambda j: backend.place(j, ["node1"], {"AdminComment": f"a{j}"}), jobs, 3)
    assert [o is None for o in out] == [j != 13 for j in jobs]
    assert isinstance(out[jobs.index(13)], SlurmCommandError) and "Invalid job id" in str(out[jobs.index(13)])
    lines = log.read_text().splitlines()
    assert sorted(ln.split()[1] for ln in lines if ln.startswith("start")) == [str(j) for j in jobs]
    assert 1 < _most_at_once(lines) <= 3  # overlapping, never past the bound (a loaded host may start them late)
