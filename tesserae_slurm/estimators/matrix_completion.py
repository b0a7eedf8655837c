"""Matrix completion baseline (as Gavel and Quasar estimate unprofiled co-locations).

Per GPU type and GPU count, a matrix over endpoints (a job key with its strategy): cell (i, j) is
i's normalized speed when packed with j, and a last column holds i's speed alone. Measured pairs fill
two cells each; the rest is completed as global mean + row bias + column bias + a low-rank residual
found by soft-impute (iterated SVD with singular values shrunk by ``lam``, Mazumder et al. 2010).
``lam`` is chosen on a seeded validation split of the observed cells. Out-of-memory cells (0.0) are
left out of the fit: like Gavel's, this baseline has no memory model and predicts every pair feasible.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .entries import Endpoint, Entry, SpeedTable, Value

LAMBDAS = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6)


def _biases(y: np.ndarray, mask: np.ndarray, reg: float = 1.0, iters: int = 20) -> tuple[float, np.ndarray, np.ndarray]:
    mu = float(y[mask].mean()) if mask.any() else 0.0
    r = np.zeros(y.shape[0])
    c = np.zeros(y.shape[1])
    m = mask.astype(float)
    resid = np.where(mask, y - mu, 0.0)
    for _ in range(iters):
        r = ((resid - c[None, :]) * m).sum(1) / (m.sum(1) + reg)
        c = ((resid - r[:, None]) * m).sum(0) / (m.sum(0) + reg)
    return mu, r, c


def soft_impute(y: np.ndarray, mask: np.ndarray, lam: float, z0: np.ndarray | None = None,
                iters: int = 100, tol: float = 1e-4) -> np.ndarray:
    """Low-rank completion of the observed cells of ``y`` (after the caller removed biases)."""
    z = np.zeros_like(y) if z0 is None else z0
    for _ in range(iters):
        x = np.where(mask, y, z)
        u, s, vt = np.linalg.svd(x, full_matrices=False)
        s = np.maximum(s - lam, 0.0)
        new = (u * s) @ vt
        delta = float(np.linalg.norm(new - z)) / max(float(np.linalg.norm(z)), 1e-9)
        z = new
        if delta < tol:
            break
    return z


def complete_path(y: np.ndarray, mask: np.ndarray, lambdas: Sequence[float]) -> list[np.ndarray]:
    """Completions for each of ``lambdas``, largest first, each warm-started from the previous one."""
    mu, r, c = _biases(y, mask)
    base = mu + r[:, None] + c[None, :]
    resid = np.where(mask, y - base, 0.0)
    out: dict[float, np.ndarray] = {}
    z = None
    for lam in sorted(lambdas, reverse=True):
        z = soft_impute(resid, mask, lam, z)
        out[lam] = base + z
    return [out[lam] for lam in lambdas]


def complete(y: np.ndarray, mask: np.ndarray, lam: float) -> np.ndarray:
    return complete_path(y, mask, [lam])[0]


def choose_lambda(y: np.ndarray, mask: np.ndarray, rng: np.random.Generator,
                  lambdas: Sequence[float] = LAMBDAS, holdout: float = 0.2) -> float:
    cells = np.argwhere(mask)
    if len(cells) < 10:
        return lambdas[-1]
    pick = rng.random(len(cells)) < holdout
    train = mask.copy()
    val = cells[pick]
    train[val[:, 0], val[:, 1]] = False
    errors = [float(np.abs(z[val[:, 0], val[:, 1]] - y[val[:, 0], val[:, 1]]).mean())
              for z in complete_path(y, train, lambdas)]
    return lambdas[int(np.argmin(errors))]


Block = tuple[str, int]  # (GPU type, GPU count): jobs pack only with jobs of their own GPU count


@dataclass(frozen=True)
class CompletionFit:
    index: dict[tuple[Block, Endpoint], int]
    matrices: dict[Block, np.ndarray]  # n x (n + 1): the last column is "alone"

    def predict(self, entry: Entry) -> Value | None:
        block = (entry.gpu_type, entry.num_gpus)
        z = self.matrices.get(block)
        i = self.index.get((block, entry.job))
        if z is None or i is None:
            return None
        if entry.partner is None:
            return Value(float(np.clip(z[i, -1], 0.01, 1.0)))
        j = self.index.get((block, entry.partner))
        if j is None:
            return None
        return Value(float(np.clip(z[i, j], 0.01, 1.0)), float(np.clip(z[j, i], 0.01, 1.0)))


class MatrixCompletion:
    """Estimator: soft-impute over the endpoint x endpoint speed matrix (the Gavel/Quasar baseline).

    One matrix per GPU type and GPU count (pairs never mix counts); rows are endpoints, columns the
    same endpoints plus "alone" (isolated speeds, as Gavel's matrix has a solo column). ``targets``
    lists entries to be predicted later, so that their endpoints get rows even when they have no
    measurement of their own (such a row is the mean plus its column's bias).
    """

    name = "mc"

    def __init__(self, seed: int = 0, targets: Sequence[Entry] = ()) -> None:
        self.seed, self.targets = seed, tuple(targets)

    def fit(self, observed: SpeedTable) -> CompletionFit:
        rng = np.random.default_rng(self.seed)
        endpoints: dict[Block, dict[Endpoint, None]] = {}
        for e in list(observed) + list(self.targets):
            for ep in (e.job, e.partner):
                if ep is not None:
                    endpoints.setdefault((e.gpu_type, e.num_gpus), {})[ep] = None
        index: dict[tuple[Block, Endpoint], int] = {}
        cells: dict[Block, list[tuple[int, int, float]]] = {b: [] for b in endpoints}
        for block, eps in endpoints.items():
            for i, ep in enumerate(sorted(eps)):
                index[(block, ep)] = i
        for e, v in observed.values.items():
            block = (e.gpu_type, e.num_gpus)
            if not v.feasible:
                continue
            i = index[(block, e.job)]
            if e.partner is None:
                cells[block].append((i, len(endpoints[block]), v.a))
                continue
            j = index[(block, e.partner)]
            cells[block] += [(i, j, v.a), (j, i, v.b)]
        matrices: dict[Block, np.ndarray] = {}
        for block in sorted(endpoints):
            n = len(endpoints[block])
            y = np.zeros((n, n + 1))
            mask = np.zeros((n, n + 1), dtype=bool)
            for i, j, val in cells[block]:
                y[i, j], mask[i, j] = val, True
            if mask.any():
                matrices[block] = complete(y, mask, choose_lambda(y, mask, rng))
        return CompletionFit(index, matrices)
