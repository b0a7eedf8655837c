"""The overheads read from a real run's directory (devcluster/overheads.py), on a run made up by hand.

Daemon run: round 1 (100-101) releases job 1 at 100.5, whose payload starts at 101.2 (launch 1.2 s from
the round's start); a pass between rounds (103-103.4) releases job 2, submitted at 102.5 onto free GPUs,
started at 104.0 (1.5 s); round 3
(106-108) signals job 1 at 106.5 and finishes its stop at 108.0 (a 1.5 s stop), and releases job 3
(started at 108.9: a round with a stop, so not a launch). Rounds: 1 s and 2 s of work, 6 s apart.
Plain run: job 11 submitted at 50 starts at 50.8; job 12 submitted at 55 waits for 11's GPU, free at 60,
and starts at 61.0.
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from tesserae_slurm.devcluster.overheads import daemon_overheads, plain_overheads


def _events(jobs, job, *evs):
    (jobs / f"events-{job}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evs))


def _ev(kind, t, gpus="0", nodes="node1"):
    return {"event": kind, "time": t, "work": 0.0, "gpus": gpus, "nodelist": nodes}


def test_daemon_run(tmp_path):
    db = sqlite3.connect(tmp_path / "state.db")
    db.executescript("""
        CREATE TABLE rounds (round_id INTEGER, started_at REAL, finished_at REAL, kind TEXT);
        CREATE TABLE slurm_calls (id INTEGER PRIMARY KEY, round_id INTEGER, time REAL, method TEXT, job_ids TEXT,
                                  ok INTEGER);
        CREATE TABLE actions (id INTEGER PRIMARY KEY, job_id TEXT, kind TEXT, status TEXT, finished_at REAL,
                              error TEXT);
        INSERT INTO rounds VALUES (1, 100, 101, 'round'), (2, 103, 103.4, 'start'), (3, 106, 108, 'round');
        INSERT INTO slurm_calls (round_id, time, method, job_ids, ok) VALUES
            (1, 100.5, 'release', '1', 1), (2, 103.3, 'release', '2', 1), (3, 106.5, 'signal', '1', 1),
            (3, 108.2, 'release', '3', 1);
        INSERT INTO actions (job_id, kind, status, finished_at, error) VALUES ('1', 'preempt', 'done', 108.0, NULL);
    """)
    db.commit()
    db.close()
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    _events(jobs, "1", _ev("start", 101.2), _ev("checkpoint", 107.0))
    _events(jobs, "2", _ev("start", 104.0))
    _events(jobs, "3", _ev("start", 108.9))
    o = daemon_overheads(tmp_path, {"1": 99.0, "2": 102.5, "3": 104.0})
    assert o.launches == pytest.approx((1.2,)) and o.between == pytest.approx((1.5,))  # 2: from its submission
    assert o.stops == pytest.approx((1.5,)) and sorted(o.rounds) == pytest.approx([1.0, 2.0])
    assert o.periods == pytest.approx((6.0,))
    assert o.summary()["stop_median_s"] == pytest.approx(1.5)


def test_plain_run(tmp_path):
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    _events(jobs, "11", _ev("start", 50.8), _ev("done", 60.0))
    _events(jobs, "12", _ev("start", 61.0), _ev("done", 70.0))
    _events(jobs, "13", _ev("start", 62.0, gpus="1"))  # another GPU: from its submission
    o = plain_overheads(tmp_path, {"11": 50.0, "12": 55.0, "13": 61.5})
    assert sorted(o.launches) == pytest.approx([0.5, 0.8, 1.0]) and o.stops == () and o.between == ()
