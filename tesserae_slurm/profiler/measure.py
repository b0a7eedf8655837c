"""How one job's throughput and memory are measured (runs inside a profiler worker process).

Steady state: ``warmup_steps`` steps first (allocator, cuDNN autotuning, caches), then ``windows``
time windows of at least ``window_s`` seconds each (and at least one step); a window's rate is its
steps over its wall time, the job's throughput is the median window. On CUDA every window ends with
a device synchronize, so queued kernels are counted in the window that launched them.

Peak memory: on CUDA the allocator's peak over a warm step; on CPU an accounting of what training
holds at its peak -- parameters, gradients, optimizer state and the activations autograd saves for
backward (counted through saved-tensor hooks, each storage once). It is deterministic, which is what
a configured memory cap needs to be testable.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..model import InputError


@dataclass(frozen=True, slots=True)
class Protocol:
    warmup_steps: int = 5
    windows: int = 5
    window_s: float = 2.0
    timeout_s: float = 900.0  # one run (both jobs) may take this long before it counts as failed

    def __post_init__(self) -> None:
        if self.warmup_steps < 0 or self.windows < 1 or self.window_s <= 0 or self.timeout_s <= 0:
            raise InputError("profiling protocol needs warmup >= 0, windows >= 1, window and timeout > 0 seconds")


def median_rate(rates: Iterable[float]) -> float:
    values = list(rates)
    return float(statistics.median(values)) if values else 0.0


def measure_windows(step: Callable[[], None], protocol: Protocol, sync: Callable[[], None],
                    clock: Callable[[], float] = time.perf_counter) -> list[float]:
    """Steps per second in each of ``protocol.windows`` windows (warm-up done by the caller)."""
    rates: list[float] = []
    sync()
    for _ in range(protocol.windows):
        start = clock()
        steps = 0
        while True:
            step()
            steps += 1
            if clock() - start >= protocol.window_s:
                break
        sync()
        rates.append(steps / (clock() - start))
    return rates


def _tensors(obj: Any) -> Iterable[Any]:
    import torch

    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _tensors(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _tensors(v)


def _storage_bytes(tensors: Iterable[Any]) -> int:
    seen: dict[int, int] = {}
    for t in tensors:
        s = t.untyped_storage()
        seen[s.data_ptr()] = s.nbytes()
    return sum(seen.values())


def accounted_peak_bytes(step: Callable[[], None], modules: Any, optimizers: Any) -> int:
    """Parameters + gradients + optimizer state + activations saved for backward, in one step."""
    import torch

    saved: list[Any] = []

    def pack(t: Any) -> Any:
        saved.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        step()
    params = list(modules.parameters())
    grads = [p.grad for p in params if p.grad is not None]
    opts = optimizers if isinstance(optimizers, (list, tuple)) else [optimizers]
    state = [t for o in opts for t in _tensors(list(o.state.values()))]
    activations = _storage_bytes(saved)
    saved.clear()
    return _storage_bytes(params) + _storage_bytes(grads) + _storage_bytes(state) + activations


def cuda_peak_bytes(step: Callable[[], None], device: Any) -> int:
    import torch

    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    step()
    torch.cuda.synchronize(device)
    return int(torch.cuda.max_memory_allocated(device))


def is_out_of_memory(exc: BaseException) -> bool:
    """CUDA's OutOfMemoryError, a CPU allocation failure, or a RuntimeError saying so."""
    import torch

    if isinstance(exc, (MemoryError, torch.OutOfMemoryError)):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)
