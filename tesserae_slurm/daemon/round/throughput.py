"""The round's feedback step: fold the throughput reports running jobs wrote since the last round into
the online measurements (``feedback/``), before the decision that uses them. Feedback improves the
speeds the engine decides with; it never costs a round, so a failure here is logged and recorded."""

from __future__ import annotations

import logging

from ..feedback.online import OnlineFeedback
from ..state.journal import Journal

log = logging.getLogger(__name__)


def take_reports(feedback: OnlineFeedback, journal: Journal, now: float, round_id: int) -> None:
    try:
        got = feedback.collect(now)
    except Exception as exc:  # noqa: BLE001 - feedback is an optimization; scheduling goes on without it
        log.exception("online feedback failed")
        journal.event(now, "feedback", f"reading throughput reports failed: {exc!r}", round_id=round_id)
        return
    if got.folded or got.refused:
        log.info("round %d: folded %d throughput report(s); refused reports of %d job(s)%s", round_id, got.folded,
                 len(got.refused), "".join(f"; job {j}: {w}" for j, w in sorted(got.refused.items())[:3]))
    for job, why in sorted(feedback.suspicious_news(got).items()):
        journal.event(now, "feedback", f"throughput reports ignored: {why}", job, round_id)
