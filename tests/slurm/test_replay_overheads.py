"""The overheads read from a real run's directory (devcluster/overheads.py), on a run made up by hand.

Daemon run: round 1 (100-101) releases job 1 at 100.5, whose payload starts on GPU 0 at 101.2 (a launch:
1.2 s from the round's start); a pass between rounds (103-103.4) releases job 2, submitted at 102.5,
onto free GPU 1, started at 104.0 (1.5 s); round 3 (106-108) signals job 1 at 106.5 (checkpoint at
107.0, stop ended at 108.0: a 1.5 s stop) and releases job 3 onto GPU 0, started at 108.9 (onto a vacated
GPU: 2.9 s from the round's start); round 4 (112-113) migrates job 2 (signal at 112.2, checkpoint at
112.8, stop ended at 113.5: 1.3 s) to GPU 2, started at 116.5, and releases job 4 onto GPU 1, started at
116.0 (a round that migrates: 4.5 s and 4.0 s); a pass between rounds (120-120.2) releases job 5,
submitted at 100 onto GPU 3, free all along, started at 121.0 (21 s: it waited for the policy, beyond a
round). Rounds: 1, 2, 1 s of work, 6 s apart.
The model (rounds of 6 s): launch 1.2 s; stop 2.9 - 1.2 = 1.7 s; migrate (4.5 + 4.0) / 2 - 1.2 = 3.05 s;
between 1.5 s (21 s left out); the rounds do not overrun.
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
        INSERT INTO rounds VALUES (1, 100, 101, 'round'), (2, 103, 103.4, 'start'), (3, 106, 108, 'round'),
                                  (4, 112, 113, 'round'), (5, 120, 120.2, 'start');
        INSERT INTO slurm_calls (round_id, time, method, job_ids, ok) VALUES
            (1, 100.5, 'release', '1', 1), (2, 103.3, 'release', '2', 1), (3, 106.5, 'signal', '1', 1),
            (3, 108.2, 'release', '3', 1), (4, 112.2, 'signal', '2', 1), (4, 114.0, 'release', '2,4', 1),
            (5, 120.1, 'release', '5', 1);
        INSERT INTO actions (job_id, kind, status, finished_at, error) VALUES ('1', 'preempt', 'done', 108.0, NULL),
            ('2', 'migrate', 'done', 113.5, NULL);
    """)
    db.commit()
    db.close()
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    _events(jobs, "1", _ev("start", 101.2), _ev("checkpoint", 107.0))
    _events(jobs, "2", _ev("start", 104.0, gpus="1"), _ev("checkpoint", 112.8, gpus="1"), _ev("start", 116.5, gpus="2"))
    _events(jobs, "3", _ev("start", 108.9))
    _events(jobs, "4", _ev("start", 116.0, gpus="1"))
    _events(jobs, "5", _ev("start", 121.0, gpus="3"))
    o = daemon_overheads(tmp_path, {"1": 99.0, "2": 102.5, "3": 104.0, "4": 110.0, "5": 100.0})
    assert o.launches == pytest.approx((1.2,)) and sorted(o.between) == pytest.approx([1.5, 21.0])  # from submission
    assert o.vacated == pytest.approx((2.9,)) and sorted(o.migrating) == pytest.approx([4.0, 4.5])
    assert sorted(o.stops) == pytest.approx([1.3, 1.5]) and sorted(o.rounds) == pytest.approx([1.0, 1.0, 2.0])
    assert o.periods == pytest.approx((6.0, 6.0))
    assert o.summary()["stop_median_s"] == pytest.approx(1.4)
    m = o.model(6.0)
    assert (m.launch_s, m.stop_s, m.migrate_s, m.between_s, m.round_over_s) == pytest.approx((1.2, 1.7, 3.05, 1.5, 0.0))


def test_plain_run(tmp_path):
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    _events(jobs, "11", _ev("start", 50.8), _ev("done", 60.0))
    _events(jobs, "12", _ev("start", 61.0), _ev("done", 70.0))
    _events(jobs, "13", _ev("start", 62.0, gpus="1"))  # another GPU: from its submission
    o = plain_overheads(tmp_path, {"11": 50.0, "12": 55.0, "13": 61.5})
    assert sorted(o.launches) == pytest.approx([0.5, 0.8, 1.0]) and o.stops == () and o.between == ()
