"""The daemon -> job contract: where to run, with whom, how. Travels in the job's AdminComment.

Compact JSON behind a fixed prefix, so `scontrol show job -o` (space-separated Key=Value) keeps it in
one token and the launcher on the compute node needs nothing but Slurm's own CLI to read it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..model import InputError

PREFIX = "tesserae-assign:"
# Assignment.extra keys: online feedback's reports directory and window length in seconds (harness/report.py),
# and where the launcher records that its payload checkpointed after the signal (harness/stop_record.py)
REPORTS_KEY, EVERY_KEY, STOPS_KEY = "reports", "report_every", "stops"


@dataclass(frozen=True)
class Assignment:
    job_id: str
    round_id: int
    gpus: Mapping[str, tuple[int, ...]]  # node -> GPU indices on that node
    partner: str = ""  # packed partner job id ("" = alone)
    strategy: str = ""  # parallelism strategy ("" = job default)
    mps_percentage: int = 0  # CUDA_MPS_ACTIVE_THREAD_PERCENTAGE when packed (0 = no MPS)
    extra: Mapping[str, str] = field(default_factory=dict)

    @property
    def packed(self) -> bool:
        return bool(self.partner)

    def encode(self) -> str:
        body = {"j": self.job_id, "r": self.round_id, "g": {n: list(v) for n, v in self.gpus.items()}}
        if self.partner:
            body["p"] = self.partner
        if self.strategy:
            body["s"] = self.strategy
        if self.mps_percentage:
            body["m"] = self.mps_percentage
        if self.extra:
            body["x"] = dict(self.extra)
        return PREFIX + json.dumps(body, separators=(",", ":"), sort_keys=True)

    @staticmethod
    def decode(text: str) -> Assignment:
        if not text.startswith(PREFIX):
            raise InputError(f"not a tesserae assignment: {text[:40]!r}")
        try:
            body = json.loads(text[len(PREFIX):])
            return Assignment(
                job_id=str(body["j"]), round_id=int(body["r"]),
                gpus={str(n): tuple(int(i) for i in v) for n, v in body["g"].items()},
                partner=str(body.get("p", "")), strategy=str(body.get("s", "")),
                mps_percentage=int(body.get("m", 0)), extra={str(k): str(v) for k, v in body.get("x", {}).items()},
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise InputError(f"malformed tesserae assignment ({exc}): {text[:80]!r}") from None


_ADMIN_COMMENT = re.compile(r"(?:^|\s)AdminComment=(\S*)")


def from_scontrol_oneliner(text: str) -> Assignment | None:
    """Find the assignment in `scontrol show job -o ID` output; None when the job has none yet."""
    m = _ADMIN_COMMENT.search(text)
    if not m or not m.group(1).startswith(PREFIX):
        return None
    return Assignment.decode(m.group(1))
