"""Online feedback on the real dev cluster: running jobs report their steps/s through the launcher, the
next round folds the reports into the table it decides with, and `tesserae explain` says so."""

from __future__ import annotations

import json
import os
import stat

from .helpers import Env, submit_tick, wait_for


def test_running_jobs_report_throughput_and_explain_shows_measured(env: Env) -> None:
    reports = env.tmp / "reports"
    env.write_config(feedback={"reports_dir": str(reports), "report_every_s": 0.5, "min_reports": 1})
    d = env.daemon()
    assert stat.S_IMODE(os.stat(reports).st_mode) == 0o1777  # created like /tmp for the jobs to write in
    jobs = [submit_tick(env, 1, 3000, name=f"fb{i}", step_time=0.02, model="DCGAN", batch="32") for i in range(9)]
    first = d.run_round()  # 9 one-GPU jobs on 8 GPUs: one pair shares a GPU
    assert first.status == "applied" and first.decision is not None and len(first.decision.packed) == 1, first
    pair = (first.decision.packed[0].placed, first.decision.packed[0].partner)
    assert first.decision.placement.jobs() == set(jobs)

    def lines(job: str) -> list[dict]:
        p = reports / f"{job}.jsonl"
        return [json.loads(x) for x in p.read_text().splitlines()] if p.exists() else []

    wait_for(lambda: all(len(lines(j)) >= 2 for j in jobs), 60, "every job to report twice")
    assert all(r["round"] == first.round_id and r["job"] == j for j in jobs for r in lines(j))
    second = d.run_round()  # folds the reports, then decides with them
    assert second.status == "applied", second.error
    store = env.store()
    body = json.loads(store.round(second.round_id).decision_json)
    assert second.plan is not None and set(second.plan.kept) == set(jobs)  # same jobs, same pair: nothing moves
    for job in pair:  # the pair's speeds in this decision came from the reports
        assert body["sources"][job]["source"] == "measured", body["sources"][job]
        assert body["sources"][job]["reports"] >= 2
    alone = next(j for j in jobs if j not in pair)
    assert body["sources"][alone]["source"] == "profiled" and body["sources"][alone]["reports"] >= 2

    out = env.tesserae("explain", pair[0])
    assert out.returncode == 0, out.stderr
    assert "measured by online feedback" in out.stdout and "steps/s" in out.stdout, out.stdout
