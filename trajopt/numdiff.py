"""Finite differences: the one module for them (tests, ``trajopt bench``, Gauss-Newton's
``jacobian="fd"``, :class:`trajopt.FunctionCost` without derivatives).

Two schemes, over columns ``k`` of a function ``f(k, s)`` (the output with input
direction ``k`` moved by ``s``):

- :func:`central_columns`: ``(f(k, h) - f(k, -h)) / 2h``, O(h^2);
- :func:`ridders_columns`: Ridders' polynomial extrapolation of central differences
  over shrinking steps, with an error estimate per entry (Numerical Recipes
  ``dfridr``, applied to every output entry at once).

and what they are used on:

- :func:`jacobian_fd`: ``(r, dr/dz)`` of a function of a Euclidean vector ``z`` (central, or
  forward differences for a Newton iteration);
- on a state manifold, inputs are perturbed in the tangent space (``state_integrate``)
  and outputs are measured with ``state_difference``, so the result is comparable
  with the analytical ``Fx`` (ndx x ndx) and ``Fu`` (ndx x nu) on any state manifold
  (free-flyer quaternions included): :func:`step_jacobians_fd` (``method="central"``,
  2 (ndx + nu) steps, or ``"ridders"``), :func:`parameter_jacobian_fd` (physical
  parameters), :func:`cost_derivatives_fd` (gradient and Hessian of a cost ``l(x, u)``);
- :func:`fd_tolerance` is the error bound to expect from a central difference
  with step ``h`` on a smooth function of unit scale; :func:`max_relative_error`
  the comparison measure.
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


def unit_step(z: np.ndarray, k: int, s: float) -> np.ndarray:
    """``z + s e_k`` (a new array)."""
    e = np.zeros(len(z))
    e[k] = s
    return z + e


def central_columns(f, n: int, h: float, difference=None) -> np.ndarray:
    """Central differences of ``f(k, s)`` (the output with input direction ``k`` moved by ``s``), one
    column per direction ``k < n``: ``difference(f(k, h), f(k, -h)) / 2h``. ``difference(plus, minus)``
    defaults to ``plus - minus``; on a state manifold it is ``state_difference(minus, plus)``. Scalar
    outputs give an (n,) gradient, (m,) outputs an (m, n) Jacobian."""
    if n == 0:
        return np.empty(0)
    diff = np.subtract if difference is None else difference
    return np.stack([diff(f(k, h), f(k, -h)) / (2.0 * h) for k in range(n)], axis=-1)


def ridders_columns(f, n: int, h: float, ntab: int = 10, con: float = 1.4) -> tuple[np.ndarray, np.ndarray]:
    """Ridders' extrapolation of each column of :func:`central_columns` (initial step ``h``, shrunk by
    ``con`` up to ``ntab`` times): ``(J, E)``, the derivatives and their error estimates."""
    if n == 0:
        return np.empty(0), np.empty(0)
    cols = [_ridders(lambda s, k=k: f(k, s), h, ntab, con) for k in range(n)]
    return np.stack([c[0] for c in cols], axis=-1), np.stack([c[1] for c in cols], axis=-1)


def jacobian_fd(fun, z, h: float = 1e-6, *, method: str = "central",
                one_sided_at_bounds: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(r, J)``: ``r = fun(z)`` and ``J = dr/dz`` by finite differences with step ``h`` (``z`` Euclidean;
    Gauss-Newton's ``jacobian="fd"`` and the tests' baseline for analytical residual Jacobians).
    ``method``: ``"central"`` (O(h^2), 2n evaluations) or ``"forward"`` (``(fun(z + h e_k) - r) / h``,
    O(h), n evaluations: a Newton iteration's Jacobian). ``one_sided_at_bounds`` (central only): where ``fun``
    refuses one side of a column (ValueError: an unknown within ``h`` of its bound, a friction of 1e-9 whose
    ``z - h`` is negative), that column is the one-sided difference on the other side; else the error is
    raised, as where both sides are refused."""
    if method not in ("central", "forward"):
        raise ValueError(f"unknown finite-difference method {method!r}; expected 'central' or 'forward'")
    z = np.asarray(z, dtype=float)
    r = fun(z)
    if method == "forward":
        return r, np.column_stack([(fun(unit_step(z, k, h)) - r) / h for k in range(len(z))])
    if not one_sided_at_bounds or len(z) == 0:
        return r, central_columns(lambda k, s: fun(unit_step(z, k, s)), len(z), h).reshape(len(r), len(z))

    def side(k, s):
        try:
            return fun(unit_step(z, k, s))
        except ValueError:
            return None

    def column(k):
        plus, minus = side(k, h), side(k, -h)
        if plus is not None and minus is not None:
            return (plus - minus) / (2.0 * h)
        if plus is None and minus is None:  # both refused: the error itself
            fun(unit_step(z, k, h))
        return (plus - r) / h if minus is None else (r - minus) / h

    return r, np.column_stack([column(k) for k in range(len(z))]).reshape(len(r), len(z))


def _perturbed(dyn, x, u, ndx):
    """``g(k, h)`` = difference(x+_0, step at the k-th tangent perturbation of size h)."""
    x_next0 = dyn.step(x, u)

    def g(k, h):
        if k < ndx:
            xn = dyn.step(dyn.state_integrate(x, unit_step(np.zeros(ndx), k, h)), u)
        else:
            xn = dyn.step(x, unit_step(u, k - ndx, h))
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
    if method not in ("central", "ridders"):
        raise ValueError(f"unknown finite-difference method {method!r}; expected 'central' or 'ridders'")
    x = np.asarray(x, dtype=float)
    u = np.asarray(u, dtype=float)
    ndx, nu = dyn.ndx, dyn.nu
    g = _perturbed(dyn, x, u, ndx)
    n_in = ndx + nu
    if method == "central":
        J = central_columns(g, n_in, CENTRAL_STEP if h is None else h).reshape(ndx, n_in)
        return FDJacobians(J[:, :ndx], J[:, ndx:])
    J, E = ridders_columns(g, n_in, RIDDERS_STEP if h is None else h, ridders_ntab, ridders_con)
    J, E = J.reshape(ndx, n_in), E.reshape(ndx, n_in)
    return FDJacobians(J[:, :ndx], J[:, ndx:], E[:, :ndx], E[:, ndx:])


def parameter_jacobian_fd(dyn, x, u, names, *, h: float = 1e-6) -> np.ndarray:
    """Central-difference ``Fp`` (ndx, total size) of ``dyn.step`` at ``(x, u)`` with respect to the physical
    parameters ``names``: each parameter moved by ``+-h`` through ``dyn.with_parameters`` (a new system per
    evaluation, so no warm start), the outputs compared with ``state_difference``."""
    p0 = dyn.get_parameters(names)
    x = np.asarray(x, dtype=float)
    u = np.asarray(u, dtype=float)

    def stepped(k, s):
        return dyn.with_parameters(names, unit_step(p0, k, s)).step(x, u)

    out = central_columns(stepped, p0.size, h, lambda plus, minus: dyn.state_difference(minus, plus))
    return out.reshape(dyn.ndx, p0.size)


def cost_derivatives_fd(value, dyn, x, u=None, *, h: float = 1e-6, h_hessian: float = 1e-4):
    """``(l, g, H)`` of a cost ``value(x, u)`` (``u`` None: a terminal cost) at ``(x, u)``, in the tangent
    coordinates ``z = (dx, du)`` (``x (+) dx``, ``u + du``): the gradient ``g`` (nz,) by central differences
    with step ``h``, the Hessian ``H`` (nz, nz) by central differences of gradients with step ``h_hessian``,
    symmetrised."""
    x = np.asarray(x, dtype=float)
    ndx = dyn.ndx
    nz = ndx + (dyn.nu if u is not None else 0)
    u0 = None if u is None else np.asarray(u, dtype=float)

    def at(z):
        return value(dyn.state_integrate(x, z[:ndx]), None if u0 is None else u0 + z[ndx:])

    def grad(z):
        return central_columns(lambda k, s: at(unit_step(z, k, s)), nz, h).reshape(nz)

    z0 = np.zeros(nz)
    g0 = grad(z0)
    H = central_columns(lambda k, s: grad(unit_step(z0, k, s)), nz, h_hessian).reshape(nz, nz)
    return value(x, u), g0, 0.5 * (H + H.T)


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
