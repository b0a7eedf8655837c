"""A job's scheduling metadata, carried in its Slurm Comment (users write it; the daemon reads it).

The user side (tsbatch) needs no access to the daemon's database: GPU count, profile key and allowed
strategies travel with the job as compact JSON behind a fixed prefix, which is also the tag that
tells the daemon the job is one of its own. The daemon's answer goes the other way, in AdminComment
(harness/assignment.py), which only operators can set.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass

from .errors import InputError
from .job import Job

PREFIX = "tesserae:v1:"
UNPROFILED = "(no profile)"  # model name the daemon gives jobs submitted with --no-profile


@dataclass(frozen=True)
class JobMeta:
    num_gpus: int
    model: str = ""  # "" together with no_profile=True: scheduled alone, never packed
    batch_size: str = ""
    parallelism: tuple[str, ...] = ()
    no_pack: bool = False
    no_profile: bool = False

    def __post_init__(self) -> None:
        if self.num_gpus <= 0:
            raise InputError(f"GPU count must be positive, got {self.num_gpus}")
        if self.no_profile == bool(self.model):
            raise InputError("a job names a model or is explicitly without a profile, not both or neither")

    def encode(self) -> str:
        body: dict[str, object] = {"g": self.num_gpus}
        if self.model:
            body["m"] = self.model
        if self.batch_size:
            body["b"] = self.batch_size
        if self.parallelism:
            body["p"] = list(self.parallelism)
        if self.no_pack:
            body["np"] = True
        if self.no_profile:
            body["nprof"] = True
        return PREFIX + json.dumps(body, separators=(",", ":"), sort_keys=True)

    @staticmethod
    def decode(text: str) -> JobMeta:
        """``text``'s metadata, or InputError. The daemon reads every job's Comment each round and a queue's jobs
        share few distinct ones, so the answers are remembered (a JobMeta never changes)."""
        return _decode(text)

    def job(self, job_id: str, user: str = "", group: str = "", account: str = "") -> Job:
        """The engine's view. Jobs without a profile get a model the daemon's profile maps to 1.0, alone.
        ``group``: packed only with jobs of the same group (``mps.cross_user: never`` passes the user);
        ``account``: the Slurm account its per-account GPU limits count against."""
        if self.no_profile:
            return Job(job_id, self.num_gpus, UNPROFILED, "", user=user, no_pack=True, group=group, account=account)
        return Job(job_id, self.num_gpus, self.model, self.batch_size, user=user,
                   parallelism=self.parallelism, no_pack=self.no_pack, group=group, account=account)


def is_tagged(comment: str) -> bool:
    return comment.startswith(PREFIX)


@functools.lru_cache(maxsize=1 << 16)
def _decode(text: str) -> JobMeta:
    if not is_tagged(text):
        raise InputError(f"not a tesserae job comment: {text[:40]!r}")
    try:
        body = json.loads(text[len(PREFIX):])
        if not isinstance(body, dict):
            raise TypeError("not an object")
        par = body.get("p", [])
        if not isinstance(par, list) or not all(isinstance(s, str) for s in par):
            raise TypeError("p must be a list of strings")
        g = body["g"]
        if not isinstance(g, int) or isinstance(g, bool):
            raise TypeError("g must be an integer")
        unknown = set(body) - {"g", "m", "b", "p", "np", "nprof"}
        if unknown:
            raise TypeError(f"unknown keys {sorted(unknown)}")
        for k in ("m", "b"):  # what tsbatch writes, exactly: a hand-made "np":"no" is not true
            if not isinstance(body.get(k, ""), str):
                raise TypeError(f"{k} must be a string")
        for k in ("np", "nprof"):
            if not isinstance(body.get(k, False), bool):
                raise TypeError(f"{k} must be true or false")
        return JobMeta(num_gpus=g, model=body.get("m", ""), batch_size=body.get("b", ""),
                       parallelism=tuple(par), no_pack=body.get("np", False),
                       no_profile=body.get("nprof", False))
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"malformed tesserae job comment ({exc}): {text[:80]!r}") from None
