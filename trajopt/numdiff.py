"""Finite-difference Jacobians of a step, through the dynamics' own interface.

One checker for tests and ``trajopt bench``. Inputs are perturbed in the tangent
space (``state_integrate``) and outputs are measured with ``state_difference``,
so the result is comparable with the analytical ``Fx`` (ndx x ndx) and ``Fu``
(ndx x nu) on any state manifold (free-flyer quaternions included).

- :func:`step_jacobians_fd` with ``method="central"``: O(h^2) central differences
  (2 (ndx + nu) steps).
- ``method="ridders"``: Ridders' polynomial extrapolation of central differences
  over shrinking steps, with an error estimate per entry (Numerical Recipes
  ``dfridr``, applied to every output entry at once).
- :func:`fd_tolerance` is the error bound to expect from a central difference
  with step ``h`` on a smooth function of unit scale.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

EPS = np.finfo(float).eps
#: Default central-difference step: balances truncation (h^2) and round-off (eps/h).
CENTRAL_STEP = EPS ** (1.0 / 3.0)
#: Default initial step of Ridders' extrapolation (see :func:`step_jacobians_fd`).
RIDDERS_STEP = 1e-4


def fd_tolerance(h: float = CENTRAL_STEP, scale: float = 1.0) -> float:
    """Expected worst error of a central difference with step ``h``.

    Truncation ~ h^2 |f'''| and round-off ~ eps |f| / h; the factor 100 covers the
    third derivatives and magnitudes met in practice for unit-scale functions.
    With the default step this is about 7e-9.
    """
    return 100.0 * scale * (h * h + EPS / h)


@dataclass
class FDJacobians:
    """Finite-difference step Jacobians (and Ridders' error estimates when available)."""

    Fx: np.ndarray
    Fu: np.ndarray
    Fx_err: np.ndarray | None = None
    Fu_err: np.ndarray | None = None


def _perturbed(dyn, x, u, ndx):
    """``g(k, h)`` = difference(x+_0, step at the k-th tangent perturbation of size h)."""
    x_next0 = dyn.step(x, u)

    def g(k, h):
        if k < ndx:
            dx = np.zeros(ndx)
            dx[k] = h
            xn = dyn.step(dyn.state_integrate(x, dx), u)
        else:
            up = np.array(u, dtype=float, copy=True)
            up[k - ndx] += h
            xn = dyn.step(x, up)
        return dyn.state_difference(x_next0, xn)

    return g


def step_jacobians_fd(dyn, x, u, *, method: str = "central", h: float | None = None,
                      ridders_ntab: int = 10, ridders_con: float = 1.4) -> FDJacobians:
    """Finite-difference ``Fx`` (ndx, ndx) and ``Fu`` (ndx, nu) of ``dyn.step`` at ``(x, u)``.

    ``method``: ``"central"`` (step ``h``, default :data:`CENTRAL_STEP`) or
    ``"ridders"`` (initial step ``h``, default 1e-4, shrunk by ``ridders_con`` up to
    ``ridders_ntab`` times; returns error estimates in ``Fx_err``/``Fu_err``). The
    initial step is small because contact modes switch within ~1e-3 of a state
    in contact (a resting body lifts off after g dt^2 ~ 1e-5 of travel): a larger
    one extrapolates across the switch.
    """
    x = np.asarray(x, dtype=float)
    u = np.asarray(u, dtype=float)
    ndx, nu = dyn.ndx, dyn.nu
    g = _perturbed(dyn, x, u, ndx)
    n_in = ndx + nu
    J = np.empty((ndx, n_in))
    if method == "central":
        h = CENTRAL_STEP if h is None else h
        for k in range(n_in):
            J[:, k] = (g(k, h) - g(k, -h)) / (2.0 * h)
        return FDJacobians(J[:, :ndx], J[:, ndx:])
    if method == "ridders":
        h = RIDDERS_STEP if h is None else h
        E = np.empty((ndx, n_in))
        for k in range(n_in):
            J[:, k], E[:, k] = _ridders(lambda s: g(k, s), h, ridders_ntab, ridders_con)
        return FDJacobians(J[:, :ndx], J[:, ndx:], E[:, :ndx], E[:, ndx:])
    raise ValueError(f"unknown finite-difference method {method!r}; expected 'central' or 'ridders'")


def parameter_jacobian_fd(dyn, x, u, names, *, h: float = 1e-6) -> np.ndarray:
    """Central-difference ``Fp`` (ndx, total size) of ``dyn.step`` at ``(x, u)`` with respect to the physical
    parameters ``names``: each parameter moved by ``+-h`` through ``dyn.with_parameters`` (a new system per
    evaluation, so no warm start), the outputs compared with ``state_difference``."""
    p0 = dyn.get_parameters(names)
    x = np.asarray(x, dtype=float)
    u = np.asarray(u, dtype=float)
    out = np.empty((dyn.ndx, p0.size))
    for k in range(p0.size):
        e = np.zeros(p0.size)
        e[k] = h
        xp = dyn.with_parameters(names, p0 + e).step(x, u)
        xm = dyn.with_parameters(names, p0 - e).step(x, u)
        out[:, k] = dyn.state_difference(xm, xp) / (2.0 * h)
    return out


def _ridders(f, h, ntab, con):
    """Ridders' extrapolation of ``(f(h) - f(-h)) / 2h`` to h -> 0, entrywise.

    Returns ``(derivative, error_estimate)``; each entry keeps the tableau value
    with the smallest estimated error.
    """
    con2 = con * con
    safe = 2.0
    prev = [(f(h) - f(-h)) / (2.0 * h)]
    best = prev[0].copy()
    err = np.full(best.shape, np.inf)
    for i in range(1, ntab):
        h /= con
        row = [(f(h) - f(-h)) / (2.0 * h)]
        fac = con2
        for j in range(1, i + 1):
            row.append((row[j - 1] * fac - prev[j - 1]) / (fac - 1.0))
            fac *= con2
            errt = np.maximum(np.abs(row[j] - row[j - 1]), np.abs(row[j] - prev[j - 1]))
            better = errt <= err
            best[better] = row[j][better]
            err[better] = errt[better]
        # Stop when the higher-order estimate has moved away by much more than the error.
        if np.all(np.abs(row[i] - prev[i - 1]) >= safe * err):
            break
        prev = row
    return best, err


def max_relative_error(A: np.ndarray, B: np.ndarray) -> float:
    """``max|A - B| / max(1, max|B|)``: the error measure used by tests and the bench."""
    A = np.asarray(A)
    B = np.asarray(B)
    if A.shape != B.shape:
        raise ValueError(f"shapes differ: {A.shape} vs {B.shape}")
    if A.size == 0:
        return 0.0
    return float(np.max(np.abs(A - B)) / max(1.0, float(np.max(np.abs(B)))))
