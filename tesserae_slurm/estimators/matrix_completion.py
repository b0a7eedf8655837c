"""Matrix completion baseline (as Gavel and Quasar estimate unprofiled co-locations).

Per GPU type, a square matrix over endpoints (a job key with its strategy): cell (i, j) is i's
normalized speed when packed with j. Measured pairs fill two cells each; the rest is completed as
global mean + row bias + column bias + a low-rank residual found by soft-impute (iterated SVD with
singular values shrunk by ``lam``, Mazumder et al. 2010). ``lam`` is chosen on a seeded validation
split of the observed cells. Out-of-memory cells (0.0) are left out of the fit: like Gavel's, this
baseline has no memory model and predicts every pair feasible.
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


def soft_impute(y: np.ndarray, mask: np.ndarray, lam: float, iters: int = 100, tol: float = 1e-4) -> np.ndarray:
    """Low-rank completion of the observed cells of ``y`` (after the caller removed biases)."""
    z = np.zeros_like(y)
    for _ in range(iters):
        x = np.where(mask, y, z)
        u, s, vt = np.linalg.svd(x, full_matrices=False)
        s = np.maximum(s - lam, 0.0)
        new = (u * s) @ vt
        delta = np.linalg.norm(new - z) / max(np.linalg.norm(z), 1e-9)
        z = new
        if delta < tol:
            break
    return z


def complete(y: np.ndarray, mask: np.ndarray, lam: float) -> np.ndarray:
    mu, r, c = _biases(y, mask)
    base = mu + r[:, None] + c[None, :]
    return base + soft_impute(np.where(mask, y - base, 0.0), mask, lam)


def choose_lambda(y: np.ndarray, mask: np.ndarray, rng: np.random.Generator,
                  lambdas: Sequence[float] = LAMBDAS, holdout: float = 0.2) -> float:
    cells = np.argwhere(mask)
    if len(cells) < 10:
        return lambdas[-1]
    pick = rng.random(len(cells)) < holdout
    train = mask.copy()
    val = cells[pick]
    train[val[:, 0], val[:, 1]] = False
    errors = []
    for lam in lambdas:
        z = complete(y, train, lam)
        errors.append(float(np.abs(z[val[:, 0], val[:, 1]] - y[val[:, 0], val[:, 1]]).mean()))
    return lambdas[int(np.argmin(errors))]


@dataclass(frozen=True)
class CompletionFit:
    index: dict[tuple[str, Endpoint], int]
    matrices: dict[str, np.ndarray]
    observed_rows: dict[str, np.ndarray]  # per GPU type: does the row/column have any observation

    def predict(self, entry: Entry) -> Value | None:
        if entry.partner is None:
            return None
        z = self.matrices.get(entry.gpu_type)
        i = self.index.get((entry.gpu_type, entry.job))
        j = self.index.get((entry.gpu_type, entry.partner))
        if z is None or i is None or j is None:
            return None
        return Value(float(np.clip(z[i, j], 0.01, 1.0)), float(np.clip(z[j, i], 0.01, 1.0)))


class MatrixCompletion:
    """Estimator: soft-impute over the endpoint x endpoint speed matrix (the Gavel/Quasar baseline).

    ``targets`` lists entries to be predicted later, so that their endpoints get rows even when they
    have no measurement of their own (such a row is the mean plus its column's bias).
    """

    name = "mc"

    def __init__(self, seed: int = 0, targets: Sequence[Entry] = ()) -> None:
        self.seed, self.targets = seed, tuple(targets)

    def fit(self, observed: SpeedTable) -> CompletionFit:
        rng = np.random.default_rng(self.seed)
        endpoints: dict[str, dict[Endpoint, None]] = {}
        for e in list(observed) + list(self.targets):
            for ep in (e.job, e.partner):
                if ep is not None:
                    endpoints.setdefault(e.gpu_type, {})[ep] = None
        index: dict[tuple[str, Endpoint], int] = {}
        matrices: dict[str, np.ndarray] = {}
        seen_rows: dict[str, np.ndarray] = {}
        for gpu, eps in endpoints.items():
            order = sorted(eps)
            for i, ep in enumerate(order):
                index[(gpu, ep)] = i
            n = len(order)
            y = np.zeros((n, n))
            mask = np.zeros((n, n), dtype=bool)
            for e, v in observed.values.items():
                if e.gpu_type != gpu or e.partner is None or not v.feasible:
                    continue
                i, j = index[(gpu, e.job)], index[(gpu, e.partner)]
                y[i, j], y[j, i] = v.a, v.b
                mask[i, j] = mask[j, i] = True
            seen_rows[gpu] = mask.any(axis=1)
            if not mask.any():
                continue
            matrices[gpu] = complete(y, mask, choose_lambda(y, mask, rng))
        return CompletionFit(index, matrices, seen_rows)
