"""Rendering docs/results.md from the studies' summaries: tables, the paper's claims beside ours,
and the sections' prose."""

from __future__ import annotations

import argparse
import statistics
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..sim.trace_source import resolve_trace
from . import fairness, prose
from . import profile_studies as profiling
from .studies import SLURM_STUDIES, Study

ROOT = Path(__file__).resolve().parents[2]  # the repository of a source checkout, where the document lives
SLURM_TITLE = "## 8. Against plain Slurm"
FAIR_TITLE = "## 9. Packing without victims (beyond the paper)"
MOVES_TITLE = "## 10. Moves that pay for themselves (beyond the paper)"
PHYSICAL_TITLE = "## 11. The physical experiment on a real Slurm, emulated GPUs (paper section 6.2)"


def _shown(path: Path) -> str:
    """``path`` relative to the repository when it lies inside it: the document names no home folder."""
    try:
        return path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return str(path)


def hours(s: float) -> str:
    return f"{s / 3600:.2f}"


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "n/a"


def main_table(study: Study) -> list[str]:
    rows = ["| configuration | avg JCT (h) | makespan (h) | migrations | preemptions | FTF worst | GPU util | "
            "decision ms (median / p99) |", "|---|---|---|---|---|---|---|---|"]
    for config in study.configs:
        s = study.results.get((config, 0.0, 0))
        if s is None:
            rows.append(f"| {config} | not run (policy not available) | | | | | | |")
            continue
        rows.append(f"| {config} | {hours(s['avg_jct_s'])} | {hours(s['makespan_s'])} | {s['migrations']} | "
                    f"{s['preemptions']} | {s['ftf']['worst']:.2f} | {s['gpu_utilization']:.0%} | "
                    f"{s['decision_ms']['median']:.1f} / {s['decision_ms']['p99']:.1f} |")
    return rows


@dataclass(frozen=True)
class Claim:
    what: str
    paper: float  # the paper's ratio (baseline / Tesserae), or its relative change for kind "change"
    ours: Callable[[Study], tuple[str, float] | None]
    why: str  # why ours may differ (shown unless ours matches)
    kind: str = "ratio"  # "ratio" (x) or "change" (percent)


def _get(study: Study, config: str) -> dict[str, Any] | None:
    return study.results.get((config, 0.0, 0))


def _ratio_of(a: str, b: str, metric: str) -> Callable[[Study], tuple[str, float] | None]:
    def f(study: Study) -> tuple[str, float] | None:
        x, y = _get(study, a), _get(study, b)
        if x is None or y is None:
            return None
        return ratio(y[metric], x[metric]), y[metric] / x[metric]  # b / a: how much better a is
    return f


def _migration_cut(study: Study) -> tuple[str, float] | None:
    t, n = _get(study, "tesserae-t"), _get(study, "tesserae-t-nomig")
    if t is None or n is None:
        return None
    change = (t["migrations"] - n["migrations"]) / n["migrations"]
    return f"{change:+.0%} ({t['migrations']} vs {n['migrations']})", change


def _best_over_baselines(metric: str) -> Callable[[Study], tuple[str, float] | None]:
    def f(study: Study) -> tuple[str, float] | None:
        t = _get(study, "tesserae-t")
        others = [(c, s) for c in study.configs if c != "tesserae-t" and (s := _get(study, c)) is not None]
        if t is None or not others:
            return None
        worst_c, worst = max(others, key=lambda cs: cs[1][metric])
        return f"{worst[metric] / t[metric]:.2f}x (vs {worst_c})", worst[metric] / t[metric]
    return f


def verdict(ours: float, paper: float, kind: str) -> str:
    """'Matches' within 5 % (5 points for changes); else the direction and size of the difference."""
    if kind == "change":
        if abs(ours - paper) <= 0.05:
            return "Matches (within 5 points)."
        same = (ours < 0) == (paper < 0)
        bigger = abs(ours) > abs(paper)
    else:
        if abs(ours / paper - 1) <= 0.05:
            return "Matches (within 5 %)."
        if abs(ours - 1) < 0.01:
            return "No difference here, where the paper finds one."
        same = (ours > 1) == (paper > 1)
        bigger = abs(ours - 1) > abs(paper - 1)
    if not same:
        return "Opposite direction."
    return "Same direction, larger." if bigger else "Same direction, smaller."


def claims_table(study: Study, claims: Sequence[Claim]) -> list[str]:
    rows = ["| comparison | paper | ours | agreement, and why ours differs |", "|---|---|---|---|"]
    for c in claims:
        ours = c.ours(study)
        paper = f"{c.paper:+.0%}" if c.kind == "change" else f"{c.paper:.2f}x"
        if ours is None:
            rows.append(f"| {c.what} | {paper} | not run | |")
            continue
        text, value = ours
        v = verdict(value, c.paper, c.kind)
        rows.append(f"| {c.what} | {paper} | {text} | {v}{'' if v.startswith('Matches') else ' ' + c.why} |")
    return rows


def bounds(study: Study) -> str:
    """Trace facts that bound the makespan, so a reader can tell how much room a scheduler had."""
    trace, _ = resolve_trace(study.setup.trace, models=study.setup.profile)
    gpus = sum(int(p.split("x")[0]) * int(p.split("x")[1].split(":")[0]) for p in study.setup.cluster.split(","))
    last = max(j.submit_time + j.duration for j in trace) - trace[0].submit_time
    work = sum(j.duration * j.num_gpus for j in trace) / gpus
    return (f"{len(trace)} jobs arriving over {(trace[-1].submit_time - trace[0].submit_time) / 3600:.1f} h; "
            f"makespan bounds without packing: the latest submit + duration is {last / 3600:.1f} h, all work on "
            f"{gpus} GPUs takes {work / 3600:.1f} h.")


def worst_jobs(summary: dict[str, Any]) -> str:
    jobs = summary.get("worst_ftf_jobs", [])
    return "; ".join(f"job {j['id']} ({j['num_gpus']} GPU {j['model']}, {j['duration'] / 60:.0f} min alone): "
                     f"rho {j['ftf']:.1f}, {j['preemptions']} preemptions, packed {j['packed_s'] / 60:.0f} min"
                     for j in jobs)


def limit_accuracy(study: Study) -> float:
    """Mean duration / time limit of the trace's jobs under slurm-backfill's defaults (the limit model
    where the trace has no ``time_limit``)."""
    from tesserae_slurm.model import JobView
    from tesserae_slurm.policies.slurm_backfill import SlurmBackfillPolicy
    from tesserae_slurm.sim.rounds import job_of

    trace, _ = resolve_trace(study.setup.trace, models=study.setup.profile)
    p = SlurmBackfillPolicy()
    return statistics.fmean(t.duration / p.time_limit(JobView(job_of(t), t.submit_time, total_work=t.duration), 0)
                            for t in trace)


def render_slurm(by: dict[str, Study]) -> list[str]:
    """Section 8: each Tesserae configuration against ``slurm-backfill`` on three setups."""
    done = [by[k] for k in SLURM_STUDIES if k in by and _get(by[k], "slurm-backfill") is not None]
    if not done:
        return []
    out = [SLURM_TITLE, "", prose.text("slurm-intro"), ""]
    heads = []
    for study in done:
        base, t = _get(study, "slurm-backfill"), _get(study, "tesserae-t")
        if base is not None and t is not None:
            heads.append(f"{study.title}: avg JCT {ratio(base['avg_jct_s'], t['avg_jct_s'])}, makespan "
                         f"{ratio(base['makespan_s'], t['makespan_s'])}")
    if heads:
        out += ["Tesserae-T over plain Slurm: " + "; ".join(heads) + ".", ""]
    for study in done:
        s, base = study.setup, _get(study, "slurm-backfill")
        assert base is not None
        out += [f"### {study.title}", "", f"Trace `{s.trace}`, cluster `{s.cluster}`, profile `{s.profile}`. "
                f"{bounds(study)} Mean time-limit accuracy {limit_accuracy(study):.2f}.", "",
                "| configuration | avg JCT (h) | makespan (h) | FTF worst | FTF p99 | GPU util | preemptions | "
                "migrations | avg JCT | makespan | FTF worst | FTF p99 | util |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for config in study.configs:
            r = _get(study, config)
            if r is None:
                out.append(f"| {config} | not run (policy not available) |" + " |" * 11)
                continue
            f, bf = r["ftf"], base["ftf"]
            out.append(f"| {config} | {hours(r['avg_jct_s'])} | {hours(r['makespan_s'])} | {f['worst']:.2f} | "
                       f"{f['p99']:.2f} | {r['gpu_utilization']:.0%} | {r['preemptions']} | {r['migrations']} | "
                       f"{ratio(base['avg_jct_s'], r['avg_jct_s'])} | {ratio(base['makespan_s'], r['makespan_s'])} | "
                       f"{ratio(bf['worst'], f['worst'])} | {ratio(bf['p99'], f['p99'])} | "
                       f"{ratio(r['gpu_utilization'], base['gpu_utilization'])} |")
        out.append("")
    out += [*prose.lines("slurm-reading", studies=",".join(SLURM_STUDIES)), ""]
    return out


def render_moves(by: dict[str, Study]) -> list[str]:
    """Section 10: every suite with the paper's plan (every move free) and with moves that pay."""
    study = by.get("moves")
    if study is None or not study.results:
        return []
    out = [MOVES_TITLE, "", prose.text("moves-intro"), "",
           "| suite | configuration | plan | avg JCT (h) | makespan (h) | FTF worst | FTF p99 | migrations | "
           "preemptions | moves per job | oscillations | same-node shifts | decision ms (median) |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    # suite, configuration, changes of JCT, migrations, moves; moves per job after / before
    changes: list[tuple[str, str, float, float, float, float]] = []
    for k, title in enumerate(study.extra["titles"]):
        for config in study.configs:
            before, after = study.results.get((k, config, "paper")), study.results.get((k, config, "paying"))
            for label, r in (("paper's (every move free)", before), ("moves that pay", after)):
                if r is None:
                    continue
                f = r["ftf"]
                out.append(f"| {title} | {config} | {label} | {hours(r['avg_jct_s'])} | {hours(r['makespan_s'])} | "
                           f"{f['worst']:.2f} | {f['p99']:.2f} | {r['migrations']} | {r['preemptions']} | "
                           f"{r['moves_per_job']:.2f} | {r['oscillations']} | {r['same_node_shifts']} | "
                           f"{r['decision_ms']['median']:.1f} |")
            if before and after:
                moved_b = before["migrations"] + before["preemptions"]
                changes.append((title, config, after["avg_jct_s"] / before["avg_jct_s"] - 1,
                                after["migrations"] / before["migrations"] - 1 if before["migrations"] else 0.0,
                                (after["migrations"] + after["preemptions"]) / moved_b - 1 if moved_b else 0.0,
                                after["moves_per_job"] / before["moves_per_job"] if before["moves_per_job"] else 1.0))
    out.append("")
    if changes:
        out += ["| suite | configuration | avg JCT | migrations | migrations and preemptions |",
                "|---|---|---|---|---|"]
        out += [f"| {t} | {c} | {j:+.1%} | {m:+.0%} | {mv:+.0%} |" for t, c, j, m, mv, _ in changes]
        worst = max(changes, key=lambda x: x[2])
        out += ["", prose.text("moves-verdict", worst=f"{worst[2]:+.1%}", worst_where=f"{worst[0]}, {worst[1]}",
                               best=f"{min(x[2] for x in changes):+.1%}",
                               mig=f"{max(x[3] for x in changes):+.0%} to {min(x[3] for x in changes):+.0%}",
                               share=f"{min(x[5] for x in changes):.0%} to {max(x[5] for x in changes):.0%}"), ""]
    out += [*prose.lines("moves-why"), ""]
    return out


def render_fairness(by: dict[str, Study], out_path: Path) -> list[str]:
    """Section 9: packing without victims (fairness.py), figures next to the document."""
    study = by.get("fairness")
    if study is None or not study.results:
        return []
    img = out_path.parent / "img"
    return fairness.render(study, "9", img, lambda p: Path(p).relative_to(out_path.parent).as_posix())


def splice(document: str, section: list[str], title: str = SLURM_TITLE) -> str:
    """``document`` with its section ``title`` (8 by default) replaced by ``section`` (inserted before
    the closing sections if it has none): regenerating one section leaves every other as it was."""
    lines = document.split("\n")
    if title in lines:
        start = lines.index(title)
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    else:
        start = end = next((i for i, line in enumerate(lines) if line.startswith("## Studies not run")
                            or line.startswith("## Not run") or line.startswith("## What differs")), len(lines))
    return "\n".join(lines[:start] + section + lines[end:])


def render(all_studies: list[Study], args: argparse.Namespace, elapsed: float) -> str:
    by = {s.key: s for s in all_studies}
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, check=False).stdout.strip() or "unknown"
    how = prose.text("header-rendered") if args.render_only else \
        prose.text("header-simulated", minutes=f"{elapsed / 60:.0f}", workers=args.workers)
    out = ["# Results: the paper's simulation comparisons, re-run", "",
           prose.text("header", commit=commit, how=how), ""]
    a100 = by.get("a100")
    if a100 is not None and a100.results:
        s = a100.setup
        out += [f"## 1. {a100.title}", "", f"Trace `{s.trace}`, cluster `{s.cluster}`, profile `{s.profile}`. "
                f"{bounds(a100)}", ""]
        out += main_table(a100) + [""]
        out += claims_table(a100, [
            Claim("Tesserae-T vs Gavel, avg JCT", 1.41, _ratio_of("tesserae-t", "gavel", "avg_jct_s"),
                  prose.text("why-gavel")),
            Claim("Tesserae-T migrations vs Gavel's migration rule", -0.36, _migration_cut, prose.text("why-mig"),
                  "change"),
            Claim("Tesserae-T vs Gavel's migration rule, avg JCT", 1.22,
                  _ratio_of("tesserae-t", "tesserae-t-nomig", "avg_jct_s"), prose.text("why-jct-mig")),
            Claim("Tesserae-T vs Tiresias(Single), avg JCT", 1.54,
                  _ratio_of("tesserae-t", "tiresias-single", "avg_jct_s"), prose.text("why-single")),
            Claim("Tesserae-T vs Tiresias(Single), makespan", 1.20,
                  _ratio_of("tesserae-t", "tiresias-single", "makespan_s"), prose.text("why-single")),
        ]) + [""]
        t = _get(a100, "tesserae-t")
        if t and t.get("worst_ftf_jobs"):
            out += [f"Tesserae-T's worst FTF cases: {worst_jobs(t)}.", ""]
    rs = by.get("restart")
    if rs is not None and rs.results and a100 is not None:
        out += [f"### 1b. {rs.title}", "", prose.text("restart-intro"), "",
                "| restart overhead | Tesserae-T avg JCT (h) | Gavel's rule avg JCT (h) | JCT ratio | migrations |",
                "|---|---|---|---|---|"]
        for label, st in (("default (30 / 90 s)", a100), ("x3 (90 / 270 s)", rs)):
            t, n = _get(st, "tesserae-t"), _get(st, "tesserae-t-nomig")
            if t and n:
                out.append(f"| {label} | {hours(t['avg_jct_s'])} | {hours(n['avg_jct_s'])} | "
                           f"{ratio(n['avg_jct_s'], t['avg_jct_s'])} | {t['migrations']} vs {n['migrations']} |")
        out += ["", prose.text("restart-closing"), ""]
    ftf = by.get("ftf")
    if ftf is not None and ftf.results:
        out += [f"## 2. {ftf.title}", "", prose.text("ftf-intro", trace=ftf.setup.trace, cluster=ftf.setup.cluster), "",
                "| configuration | FTF worst | FTF p90 | FTF median | share of jobs with rho > 1 | avg JCT (h) |",
                "|---|---|---|---|---|---|"]
        for config in ftf.configs:
            r = _get(ftf, config)
            if r is None:
                out.append(f"| {config} | not run (policy not available) | | | | |")
                continue
            f = r["ftf"]
            out.append(f"| {config} | {f['worst']:.2f} | {f['p90']:.2f} | {f['median']:.2f} | "
                       f"{f['share_above_1']:.0%} | {hours(r['avg_jct_s'])} |")
        g, t = _get(ftf, "gavel-ftf"), _get(ftf, "tesserae-ftf")
        if g and t:
            lower = t["ftf"]["worst"] < g["ftf"]["worst"]
            tf, gf = t["ftf"], g["ftf"]
            out += ["", *prose.lines(
                "ftf-ours", worst_how="lower, as in the paper" if lower else "higher, unlike the paper",
                t_worst=tf["worst"], g_worst=gf["worst"],
                median_how="lower" if tf["median"] < gf["median"] else "higher", t_median=tf["median"],
                g_median=gf["median"], t_p90=tf["p90"], g_p90=gf["p90"], t_jobs=worst_jobs(t),
                g_jobs=worst_jobs(g)), ""]
    gt = by.get("gavel-trace")
    if gt is not None and gt.results:
        rate = gt.setup.trace.split(":")[3]
        out += [f"## 3. {gt.title}", "", prose.text("gavel-trace-intro", trace=gt.setup.trace, rate=rate,
                                                     cluster=gt.setup.cluster, bounds=bounds(gt)), ""]
        out += main_table(gt) + [""]
        out += claims_table(gt, [
            Claim("Tesserae-T vs the worst baseline, avg JCT", 1.87, _best_over_baselines("avg_jct_s"),
                  prose.text("why-gavel-trace", rate=rate)),
            Claim("Tesserae-T vs the worst baseline, makespan", 1.32, _best_over_baselines("makespan_s"),
                  prose.text("why-gavel-trace", rate=rate)),
        ]) + [""]
        t, ts = _get(gt, "tesserae-t"), _get(gt, "tiresias-single")
        if t and ts:
            out += [f"Against Tiresias(Single) on this trace: avg JCT {ratio(ts['avg_jct_s'], t['avg_jct_s'])}, "
                    "makespan "
                    f"{ratio(ts['makespan_s'], t['makespan_s'])}.", ""]
    nz = by.get("noise")
    if nz is not None and nz.results:
        base = nz.results.get(("tesserae-t", 0.0, 0))
        out += [f"## 4. {nz.title}", "", prose.text("noise-intro", trace=nz.setup.trace, cluster=nz.setup.cluster,
                                                     seeds=", ".join(map(str, nz.seeds))), "",
                "| noise n | avg JCT (h) | vs n = 0 | makespan (h) | vs n = 0 |", "|---|---|---|---|---|"]
        worst = 1.0
        for level in nz.noise:
            runs = [v for (c, nn, _), v in nz.results.items() if nn == level]
            if not runs or base is None:
                continue
            j = [r["avg_jct_s"] for r in runs]
            m = [r["makespan_s"] for r in runs]
            worst = max(worst, max(j) / base["avg_jct_s"])
            out.append(f"| {level:g} | {hours(statistics.fmean(j))} ({hours(min(j))}-{hours(max(j))}) | "
                       f"{statistics.fmean(j) / base['avg_jct_s']:.2f}x | {hours(statistics.fmean(m))} | "
                       f"{statistics.fmean(m) / base['makespan_s']:.2f}x |")
        top = [v for (c, nn, _), v in nz.results.items() if nn == max(nz.noise)]
        mean_j = statistics.fmean(r["avg_jct_s"] for r in top) / base["avg_jct_s"] if top and base else 1.0
        mean_m = statistics.fmean(r["makespan_s"] for r in top) / base["makespan_s"] if top and base else 1.0
        out += ["", prose.text("noise-ours", level=max(nz.noise), mean_j=mean_j, worst=worst, mean_m=mean_m,
                               agreement=verdict(mean_j, 1.12, "ratio")[:-1].lower()), ""]
        lasts = [(n, r["last_jobs"][0]) for n in (0.0, max(nz.noise)) for (c, nn, sd), r in nz.results.items()
                 if nn == n and sd == nz.seeds[0] and r.get("last_jobs")]
        if mean_m > 1.05 and len(lasts) == 2:
            desc = "; ".join(f"n = {n:g}: job {j['id']} ({j['num_gpus']}-GPU {j['model']}, "
                             f"{j['duration'] / 3600:.1f} h "
                             f"alone, submitted at {j['submit'] / 3600:.1f} h) finished at {j['finish'] / 3600:.1f} h"
                             for n, j in lasts)
            out += [prose.text("noise-makespan", seed=nz.seeds[0], desc=desc), ""]
    v = by.get("v100")
    if v is not None and v.results and a100 is not None:
        out += [f"## 5. {v.title}", "", prose.text("v100-intro", cluster=v.setup.cluster), ""]
        out += main_table(v) + [""]
        out += claims_table(v, [
            Claim("V100: Tesserae-T vs Tiresias(Single), avg JCT", 1.08,
                  _ratio_of("tesserae-t", "tiresias-single", "avg_jct_s"), prose.text("why-v100")),
            Claim("V100: Tesserae-T vs Tiresias(Single), makespan", 1.03,
                  _ratio_of("tesserae-t", "tiresias-single", "makespan_s"), prose.text("why-v100")),
        ]) + ["", prose.text("v100-closing"), ""]
    est = by.get("estimators")
    if est is not None and est.results:
        out += profiling.render_estimators(est, "6")
    par = by.get("parallelism")
    if par is not None and par.results:
        out += profiling.render_parallelism(par, "7")
    out += render_slurm(by)
    out += render_fairness(by, Path(args.out))
    out += render_moves(by)
    out += [PHYSICAL_TITLE, "", *prose.lines("physical"), ""]
    missing = sorted({c for s in all_studies for c in s.missing})
    not_run = [s.key for s in all_studies if not s.results]
    if not_run:
        out += ["## Studies not run yet", "", f"{', '.join(not_run)}: run `scripts/reproduce_results.py --only "
                f"{','.join(not_run)}`.", ""]
    if missing:
        out += ["## Not run", "", f"Configurations whose policy module is not available in this checkout: "
                f"{', '.join(missing)}. Re-run the script once they exist.", ""]
    out += ["## What differs from the paper's setup everywhere", "", *prose.lines("what-differs"), ""]
    out += ["## Reproduce", "", *prose.lines("reproduce", studies=",".join(SLURM_STUDIES),
                                             cache=_shown(Path(args.cache))), ""]
    return "\n".join(out)
