"""A small exact Gaussian process in numpy: Matern-5/2 over strategy features, shared across tasks.

Tasks are the search problems of one LLM (alone, or packed with one partner each): they share the
shape of speed over the strategy space but not its level. The kernel is

    k((x, t), (x', t')) = s2 * m52(|x - x'| / ell) * (rho + (1 - rho) [t == t']) + b2 * [t == t']

(intrinsic coregionalization with one inter-task correlation ``rho``, plus a per-task offset with
variance ``b2``) and a Gaussian noise ``noise``. Hyperparameters come from a small grid by maximum
log marginal likelihood; data are a few hundred points at most, so a Cholesky per grid point is cheap.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_factor, cho_solve

SQRT5 = math.sqrt(5.0)


@dataclass(frozen=True, slots=True)
class GpHyper:
    lengthscale: float
    rho: float  # correlation between tasks
    offset: float  # variance of a per-task constant (standardized units)
    noise: float  # noise variance (standardized units)


DEFAULT_GRID = tuple(GpHyper(ell, rho, off, nz) for ell, rho, off, nz in itertools.product(
    (0.15, 0.3, 0.6), (0.0, 0.6, 0.9), (0.25, 1.0), (0.005, 0.05)))
# where memory runs out: +-1 labels, so only the shape (length scale, task correlation) is searched
FEASIBILITY_GRID = tuple(GpHyper(ell, rho, 0.25, 0.05)
                         for ell, rho in itertools.product((0.15, 0.3, 0.6), (0.0, 0.6, 0.9)))


def matern52(x1: np.ndarray, x2: np.ndarray, ell: float) -> np.ndarray:
    d = np.sqrt(np.maximum(((x1[:, None, :] - x2[None, :, :]) ** 2).sum(-1), 0.0)) / ell
    k: np.ndarray = (1.0 + SQRT5 * d + 5.0 / 3.0 * d * d) * np.exp(-SQRT5 * d)
    return k


def kernel(x1: np.ndarray, t1: np.ndarray, x2: np.ndarray, t2: np.ndarray, h: GpHyper) -> np.ndarray:
    same = (t1[:, None] == t2[None, :]).astype(float)
    k: np.ndarray = matern52(x1, x2, h.lengthscale) * (h.rho + (1.0 - h.rho) * same) + h.offset * same
    return k


@dataclass(frozen=True)
class GpPosterior:
    """A fitted GP: predictions in the units of the training targets."""

    x: np.ndarray
    tasks: np.ndarray
    hyper: GpHyper
    mean: float
    scale: float
    chol: tuple[np.ndarray, bool]
    alpha: np.ndarray

    def predict(self, xs: np.ndarray, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(mean, standard deviation) of the latent function at ``xs`` in tasks ``ts``."""
        ks = kernel(xs, ts, self.x, self.tasks, self.hyper)
        mu = ks @ self.alpha
        v = cho_solve(self.chol, ks.T)
        prior = 1.0 + self.hyper.offset
        var = np.maximum(prior - np.einsum("ij,ji->i", ks, v), 1e-12)
        return self.mean + self.scale * mu, self.scale * np.sqrt(var)


def _standardize(y: np.ndarray) -> tuple[np.ndarray, float, float]:
    mean = float(y.mean())
    scale = float(y.std())
    if not math.isfinite(scale) or scale < 1e-6:
        scale = 1.0
    return (y - mean) / scale, mean, scale


def _fit(x: np.ndarray, t: np.ndarray, z: np.ndarray, h: GpHyper) -> tuple[float, tuple[np.ndarray, bool], np.ndarray]:
    k = kernel(x, t, x, t, h) + (h.noise + 1e-9) * np.eye(len(z))
    chol = cho_factor(k, lower=True)
    alpha = cho_solve(chol, z)
    logdet = 2.0 * float(np.log(np.diag(chol[0])).sum())
    lml = -0.5 * float(z @ alpha) - 0.5 * logdet - 0.5 * len(z) * math.log(2 * math.pi)
    return lml, chol, alpha


def fit_gp(x: np.ndarray, tasks: np.ndarray, y: np.ndarray, hyper: GpHyper | None = None,
           grid: tuple[GpHyper, ...] = DEFAULT_GRID) -> GpPosterior:
    """Exact GP on ``y``; ``hyper`` fixed, or chosen from ``grid`` by log marginal likelihood."""
    z, mean, scale = _standardize(np.asarray(y, dtype=float))
    x = np.asarray(x, dtype=float)
    tasks = np.asarray(tasks)
    choices = (hyper,) if hyper is not None else grid
    best: tuple[float, GpHyper, tuple[np.ndarray, bool], np.ndarray] | None = None
    for h in choices:
        try:
            lml, chol, alpha = _fit(x, tasks, z, h)
        except np.linalg.LinAlgError:
            continue
        if best is None or lml > best[0]:
            best = (lml, h, chol, alpha)
    if best is None:
        raise np.linalg.LinAlgError("no GP hyperparameters gave a positive definite kernel")
    _, h, chol, alpha = best
    return GpPosterior(x, tasks, h, mean, scale, chol, alpha)


def expected_improvement(mu: np.ndarray, sd: np.ndarray, best: float) -> np.ndarray:
    from scipy.stats import norm

    sd = np.maximum(sd, 1e-9)
    z = (mu - best) / sd
    ei: np.ndarray = (mu - best) * norm.cdf(z) + sd * norm.pdf(z)
    return ei
