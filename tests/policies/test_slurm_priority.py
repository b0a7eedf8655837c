"""slurm-priority: the site's order (Slurm's priority, then nice, then arrival)."""

from __future__ import annotations

from tesserae_slurm.policies.registry import make_policy

from .policy_helpers import inp, view


def test_order_is_priority_then_nice_then_arrival():
    views = [view("a", submit=0)._replace(site_priority=10.0), view("b", submit=1)._replace(site_priority=90.0),
             view("c", submit=2)._replace(nice=-5), view("d", submit=3), view("e", submit=4)._replace(nice=-5)]
    ranking, _ = make_policy("slurm-priority").rank(inp(views), None)
    assert ranking.order == ("b", "a", "c", "e", "d")
