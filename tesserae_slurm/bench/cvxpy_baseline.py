"""The ``gavel-cvxpy`` baseline of `tesserae bench scale`: Gavel's packed LP through cvxpy/ECOS, capped.

The timed call is the whole policy decision (``GavelCvxpyPolicy.rank`` on a fresh policy state: LP
build, cvxpy compile, solve, Gavel's round mechanism), as for the HiGHS ``gavel`` baseline, but in a
child process killed at the cap (``capped.py``), because ECOS has no time limit.
"""

from __future__ import annotations

from typing import Any

from ..model import Cluster, JobView
from .capped import CappedRun, run_capped

_SETUP = f"{__name__}:child_setup"
_CALL = f"{__name__}:child_call"


def child_setup(args: tuple[Cluster, tuple[JobView, ...], str | None, str]) -> dict[str, Any]:
    """In the child, untimed: imports (cvxpy included), the speed lookup, the policy."""
    import cvxpy  # noqa: F401  (import cost is not the solver's)

    from ..policies.base import SchedulingInput
    from ..policies.gavel_cvxpy import CvxpyResult, GavelCvxpyPolicy
    from ..profiles import load_profile
    from ..profiles.speeds import SpeedModel

    cluster, views, solver, profile = args
    solves: list[CvxpyResult] = []
    policy = GavelCvxpyPolicy(solver=solver, on_solve=solves.append)
    inp = SchedulingInput(now=1e6, round_s=360.0, jobs=views, cluster=cluster,
                          throughput=SpeedModel(load_profile(profile), cluster).lookup())
    return {"policy": policy, "input": inp, "solves": solves}


def child_call(ctx: dict[str, Any]) -> dict[str, Any]:
    """In the child, timed: one round of the policy from its initial state (so the LP is solved)."""
    import cvxpy

    policy = ctx["policy"]
    policy.rank(ctx["input"], policy.initial_state())
    res = ctx["solves"][-1] if ctx["solves"] else None
    if res is None:
        return {"solver": "", "status": "no solve"}
    return {"solver": res.solver, "status": res.cvxpy_status, "build_s": res.build_s, "compile_s": res.compile_s,
            "solve_s": res.solve_s, "variables": res.num_variables, "objective": res.allocation.objective,
            "cvxpy": cvxpy.__version__}


def time_gavel_cvxpy(cluster: Cluster, views: tuple[JobView, ...], cap_s: float, solver: str | None = "ECOS",
                     profile: str = "a100") -> CappedRun:
    return run_capped(_SETUP, _CALL, (cluster, views, solver, profile), cap_s)


def describe(run: CappedRun) -> str:
    """One line for the report: solver, phases, size, memory."""
    mem = f"peak RSS {run.peak_rss_mib:.0f} MiB" if run.peak_rss_mib is not None else ""
    if run.ready_rss_mib is not None and mem:
        mem += f" ({run.ready_rss_mib:.0f} MiB before the call)"
    r = run.result
    if not isinstance(r, dict) or "build_s" not in r:
        return "; ".join(x for x in (run.error, mem) if x)
    return (f"cvxpy {r.get('cvxpy', '')} + {r['solver']} ({r['status']}): build {r['build_s']:.2f} s, "
            f"compile {r['compile_s']:.2f} s, solve {r['solve_s']:.2f} s; {r['variables']} variables; {mem}")
