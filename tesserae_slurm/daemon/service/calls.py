"""A SlurmBackend wrapper that records every call: the audit trail of what the daemon did to Slurm.

Changing calls (place, release, signal, ...) are kept as records the loop stores per round, so
"kept jobs got no Slurm call" is a fact in the database, not a claim; every call, reads included,
feeds the call and error counters of /metrics.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ...slurm import SlurmBackend, SlurmError, SlurmJob, SlurmNode
from ...slurm.backend import Script, Signal

T = TypeVar("T")

WRITES = ("submit", "place", "release", "hold", "admin_hold", "evict", "signal",
          "requeue_hold", "cancel", "update_comment")
READS = ("list_jobs", "list_jobs_brief", "poll_jobs", "job_states", "list_nodes", "ping", "slurm_version")


@dataclass(frozen=True)
class CallRecord:
    time: float
    method: str
    job_ids: tuple[str, ...]
    ok: bool
    error: str
    ms: float


def _ids(method: str, args: tuple[Any, ...]) -> tuple[str, ...]:
    if not args or method in READS or method == "submit":
        return ()
    first = args[0]
    if isinstance(first, Iterable) and not isinstance(first, (str, bytes)):
        return tuple(str(j) for j in first)
    return (str(first),)


class RecordingBackend:
    """Delegates to ``inner``; ``drain()`` hands over the write records made since the last drain."""

    def __init__(self, inner: SlurmBackend, clock: Callable[[], float] = time.time) -> None:
        self.inner = inner
        self._clock = clock
        self._records: list[CallRecord] = []
        self.calls: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self._lock = threading.Lock()  # a round's starts call from several threads at once

    def drain(self) -> list[CallRecord]:
        with self._lock:
            out, self._records = self._records, []
        return out

    def _call(self, method: str, call: Callable[..., T], *args: Any) -> T:
        t0 = time.perf_counter()
        with self._lock:
            self.calls[method] += 1
        try:
            result = call(*args)
        except SlurmError as exc:
            self._record(method, args, str(exc), t0)
            raise
        self._record(method, args, None, t0)
        return result

    def _record(self, method: str, args: tuple[Any, ...], error: str | None, t0: float) -> None:
        ms = (time.perf_counter() - t0) * 1e3
        with self._lock:
            if error is not None:
                self.errors[method] += 1
            if method in WRITES:
                self._records.append(CallRecord(self._clock(), method, _ids(method, args), error is None,
                                                error or "", ms))

    # The SlurmBackend protocol, spelled out so type checkers and readers see it.
    def list_jobs(self, partition: str | None = None) -> tuple[SlurmJob, ...]:
        return self._call("list_jobs", self.inner.list_jobs, partition)

    def list_jobs_brief(self, job_ids: Iterable[int]) -> tuple[SlurmJob, ...]:
        return self._call("list_jobs_brief", self.inner.list_jobs_brief, list(job_ids))

    def poll_jobs(self, partition: str) -> tuple[tuple[str, str], ...]:
        return self._call("poll_jobs", self.inner.poll_jobs, partition)

    def job_states(self) -> tuple[tuple[str, str], ...] | None:
        return self._call("job_states", self.inner.job_states)

    def list_nodes(self, partition: str | None = None) -> tuple[SlurmNode, ...]:
        return self._call("list_nodes", self.inner.list_nodes, partition)

    def ping(self) -> None:
        self._call("ping", self.inner.ping)

    def slurm_version(self) -> tuple[int, int]:
        return self._call("slurm_version", self.inner.slurm_version)

    def submit(self, script: Script, extra_args: Sequence[str] = (), env: Mapping[str, str] | None = None) -> int:
        return self._call("submit", self.inner.submit, script, extra_args, env)

    def place(self, job_id: int, nodes: Sequence[str], extra_updates: Mapping[str, str] | None = None) -> None:
        self._call("place", self.inner.place, job_id, nodes, extra_updates)

    def release(self, job_ids: Iterable[int]) -> None:
        self._call("release", self.inner.release, list(job_ids))

    def hold(self, job_ids: Iterable[int]) -> None:
        self._call("hold", self.inner.hold, list(job_ids))

    def admin_hold(self, job_ids: Iterable[int]) -> None:
        self._call("admin_hold", self.inner.admin_hold, list(job_ids))

    def evict(self, job_id: int) -> None:
        self._call("evict", self.inner.evict, job_id)

    def signal(self, job_ids: Iterable[int], sig: Signal = "USR1", batch_only: bool = True) -> dict[int, str]:
        return self._call("signal", self.inner.signal, list(job_ids), sig, batch_only)

    def requeue_hold(self, job_ids: Iterable[int]) -> None:
        self._call("requeue_hold", self.inner.requeue_hold, list(job_ids))

    def cancel(self, job_id: int) -> None:
        self._call("cancel", self.inner.cancel, job_id)

    def update_comment(self, job_id: int, comment: str | None = None, admin_comment: str | None = None) -> None:
        self._call("update_comment", self.inner.update_comment, job_id, comment, admin_comment)
