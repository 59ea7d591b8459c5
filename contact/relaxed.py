"""Relaxed hard contact: the contact problem on its central path (parameter ``kappa >= 0``).

Hard contact (:mod:`contact.lcp`, :mod:`contact.ncp`) asks, per normal (or joint-limit)
row, ``lambda_n >= 0``, ``c_n >= 0``, ``lambda_n c_n = 0`` with ``c = A lambda + b``
(``A`` the Delassus matrix, ``b`` the free contact velocity plus the penetration
bias). Its exact gradient is zero wherever a contact is not yet made (the
impulse is zero whatever the controls do) and carries nothing about contacts
that could be made. Following Dojo's interior-point relaxation and Pang et al.
(2023)'s log-barrier smoothing, the relaxed model keeps every row strictly
inside and puts complementarity on the central path::

    normal / limit row i:   lambda_i c_i = kappa w(phi_i),       lambda_i > 0, c_i > 0
    friction of a contact:  c_T (s^2 - |lambda_T|^2) + 2 kappa lambda_T = 0,   s = mu lambda_n,
                            |lambda_T| < s

The friction equation is the stationarity of ``c_T . lambda_T - kappa log(s^2 - |lambda_T|^2)``
over the cone of radius ``s``: maximal dissipation with a barrier, so friction
opposes the slip and stays inside the cone. ``T`` is a contact's whole tangent
plane for the Coulomb cone (``contact="ncp"``) and each pyramid direction on its own
for the boxed LCP (``contact="lcp"``); in planar scenes (one direction) the two are
the same equation, as the hard models are.

``w(phi) = (1 - (phi/d)^2)^2`` for a gap ``0 <= phi <= d``, 1 in penetration, 0 beyond ``d``
(the *smoothing distance*): the relaxed force fades to zero, with its derivative, at
the edge of the detection range, so the step stays C^1 as pairs enter it. A body
at rest a height ``phi`` above the ground (``c_n = phi / dt``) under its weight ``m g``
(``lambda_n = m g dt``) hovers where ``phi = kappa w / (m g)``: ``kappa`` is a weight
times a hover distance (J), the unit :func:`auto_schedule` uses.

``kappa = 0`` is the hard model; the simulator then uses the exact LCP/NCP solvers.
As ``kappa -> 0`` the relaxed impulses converge to the hard ones (tests).

Solution. With the friction radii ``s`` held fixed, the equations are the stationarity
conditions of the strictly convex barrier function
``0.5 lambda'A lambda + b'lambda - t sum w log lambda_n - t sum log(s^2 - |lambda_T|^2)``
(at ``t = kappa``), which damped Newton minimises robustly from any interior point, even
for the rank-deficient ``A`` of a flat patch. ``t`` follows the central path from a
large value down to ``kappa``, the radii following ``mu lambda_n`` after each stage; at
``kappa``, Newton steps on the coupled residual (radii moving with ``lambda_n``), kept when
they lower it, alternate with fixed-point steps on the radii until the residual
vanishes. A previous step's impulses warm-start it.

Jacobians, by the implicit function theorem on the same residual: with
``R(lambda, c; theta) = 0`` and ``dR/d(lambda, c)`` the Newton matrix at the
solution, ``d(lambda, c)/dtheta = -(dR/d(lambda, c))^-1 dR/dtheta`` where
``dR/dtheta`` holds ``-(dc/dtheta at fixed lambda)`` on the ``c = A lambda + b`` rows and
``-kappa w'(phi) dphi/dtheta`` on the normal rows
(:meth:`RelaxedAdapter.linearize`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from .adapter import Linearization

NORMAL = 0
FRICTION = 1
#: Relative residual at which the Newton method stops.
TOLERANCE = 1e-12
#: Pairs whose fade ``w`` is below this (the edge of the smoothing distance) are left out.
WEIGHT_FLOOR = 1e-10


@dataclass
class RelaxedProblem:
    """One step's relaxed contact problem over ``m`` rows.

    ``A`` (m, m) Delassus matrix, ``b`` (m,) free contact velocity (with the bias);
    ``kind`` (m,) ``NORMAL`` or ``FRICTION``; for a friction row, ``normal_of`` is its
    normal row and ``block_start``/``block_size`` its tangent block (the rows that share
    one barrier: a whole contact for the cone, the row alone for the pyramid); ``mu``
    (m,) friction coefficient per friction row; ``weight``/``dweight`` (m,) ``w(phi)``
    and ``w'(phi)`` on normal rows (the fade of the module docstring).
    """

    A: np.ndarray
    b: np.ndarray
    kind: np.ndarray
    normal_of: np.ndarray
    block_start: np.ndarray
    block_size: np.ndarray
    mu: np.ndarray
    weight: np.ndarray
    dweight: np.ndarray
    kappa: float


@dataclass
class RelaxedSolution:
    """Impulses ``lam`` (m,), contact velocities ``c`` (m,), Newton ``iterations``, final residual
    norm, ``converged``, and ``K`` (m, m): the residual's Jacobian at the answer."""

    lam: np.ndarray
    c: np.ndarray
    iterations: int
    residual: float
    converged: bool
    K: np.ndarray
    warm_start_hit: bool = False
    keep: np.ndarray | None = None  # the rows that took part (see _active); K is over them


def fade(phi: np.ndarray, distance: float):
    """``(w, w')`` of the module docstring at signed distances ``phi`` (C^1, 1 in penetration, 0 beyond)."""
    phi = np.asarray(phi, dtype=float)
    s = np.clip(phi / distance, 0.0, 1.0)
    w = (1.0 - s * s) ** 2
    dw = np.where((phi > 0.0) & (phi < distance), -4.0 * s * (1.0 - s * s) / distance, 0.0)
    return w, dw


def rows_of(layout, cone: bool):
    """Row structure of a :class:`~contact.adapter.RowLayout` (``nc`` contacts of ``r`` rows, normal first,
    then ``nlim`` limit rows): ``(kind, normal_of, block_start, block_size, mu)``."""
    nc, r, m = layout.nc, layout.r, layout.m
    kind = np.full(m, NORMAL, dtype=np.int64)
    normal_of = np.arange(m, dtype=np.int64)
    start = np.arange(m, dtype=np.int64)
    size = np.ones(m, dtype=np.int64)
    mu = np.zeros(m)
    fr = layout.mu
    for c in range(nc):
        n = c * r
        for t in range(1, r):
            kind[n + t] = FRICTION
            normal_of[n + t] = n
            mu[n + t] = fr[c]
            if cone:
                start[n + t], size[n + t] = n + 1, r - 1
    return kind, normal_of, start, size, mu


def friction_blocks(p: RelaxedProblem):
    """The friction blocks with friction: ``(start, size, normal, mu)`` arrays, one entry per block."""
    first = (p.kind == FRICTION) & (p.block_start == np.arange(len(p.b))) & (p.mu > 0)
    idx = np.flatnonzero(first)
    return (p.block_start[idx].astype(np.int64), p.block_size[idx].astype(np.int64),
            p.normal_of[idx].astype(np.int64), p.mu[idx].astype(float))


@njit(cache=True)
def _lin_solve(M, r):
    """``M^-1 r``, least squares where ``M`` is singular (a row with no barrier and no inertia)."""
    try:
        return np.linalg.solve(M, r)
    except Exception:  # noqa: BLE001 -- numba raises LinAlgError, which it cannot name
        return np.linalg.lstsq(M, r, 1e-12)[0]


@njit(cache=True)
def _barrier(A, b, kind, weight, bs, bn, s, t, lam):
    """``f(lam)``, or inf outside the domain (see :func:`_barrier_newton`)."""
    m = b.shape[0]
    f = 0.0
    for i in range(m):
        ci = b[i]
        for k in range(m):
            ci += 0.5 * A[i, k] * lam[k]
        f += lam[i] * ci
        if kind[i] == NORMAL:
            if lam[i] <= 0.0:
                return np.inf
            f -= t * weight[i] * np.log(lam[i])
    for k in range(bs.shape[0]):
        if s[k] <= 0.0:
            continue
        t2 = 0.0
        for i in range(bs[k], bs[k] + bn[k]):
            t2 += lam[i] * lam[i]
        if t2 >= s[k] * s[k]:
            return np.inf
        f -= t * np.log(s[k] * s[k] - t2)
    return f


@njit(cache=True)
def _barrier_newton(A, b, kind, weight, bs, bn, s, t, lam, max_iter, tol):
    """Minimise the strictly convex ``f(lam) = 0.5 lam'A lam + b'lam - t sum_n w log lam_n
    - t sum_k log(s_k^2 - |lam_Tk|^2)`` over the normal rows and the friction blocks (radii ``s``
    held fixed; other rows stay 0) by damped Newton from an interior ``lam`` (in place), until the
    Newton decrement is below ``tol``. Returns the iterations taken."""
    m = b.shape[0]
    nb = bs.shape[0]
    free = np.zeros(m, dtype=np.bool_)
    for i in range(m):
        if kind[i] == NORMAL:
            free[i] = True
    for k in range(nb):
        for i in range(bs[k], bs[k] + bn[k]):
            free[i] = s[k] > 0.0
            if s[k] <= 0.0:
                lam[i] = 0.0
    for k in range(nb):  # radii may have shrunk: bring the tangential impulses inside
        t2 = 0.0
        for i in range(bs[k], bs[k] + bn[k]):
            t2 += lam[i] * lam[i]
        if s[k] > 0.0 and t2 >= (0.99 * s[k]) ** 2:
            shrink = 0.99 * s[k] / np.sqrt(t2)
            for i in range(bs[k], bs[k] + bn[k]):
                lam[i] *= shrink
    idx = np.flatnonzero(free)
    nf = idx.shape[0]
    g = np.empty(m)
    H = np.empty((m, m))
    Hf = np.empty((nf, nf))
    gf = np.empty(nf)
    step = np.zeros(m)
    it = 0
    while it < max_iter:
        it += 1
        c = A @ lam + b
        g[:] = c
        H[:, :] = A
        for i in range(m):
            if kind[i] == NORMAL:
                g[i] -= t * weight[i] / lam[i]
                H[i, i] += t * weight[i] / (lam[i] * lam[i])
        for k in range(nb):
            if s[k] <= 0.0:
                continue
            t2 = 0.0
            for i in range(bs[k], bs[k] + bn[k]):
                t2 += lam[i] * lam[i]
            D = s[k] * s[k] - t2
            for i in range(bs[k], bs[k] + bn[k]):
                g[i] += 2.0 * t * lam[i] / D
                H[i, i] += 2.0 * t / D
                for j in range(bs[k], bs[k] + bn[k]):
                    H[i, j] += 4.0 * t * lam[i] * lam[j] / (D * D)
        for a in range(nf):
            gf[a] = g[idx[a]]
            for a2 in range(nf):
                Hf[a, a2] = H[idx[a], idx[a2]]
        d = _lin_solve(Hf, -gf)
        dec = -(gf @ d)
        if not dec >= tol * tol:
            break
        step[:] = 0.0
        for a in range(nf):
            step[idx[a]] = d[a]
        f0 = _barrier(A, b, kind, weight, bs, bn, s, t, lam)
        if not np.isfinite(f0):
            break
        alpha = 1.0
        accepted = False
        for _ in range(60):
            trial = lam + alpha * step
            f1 = _barrier(A, b, kind, weight, bs, bn, s, t, trial)
            if f1 <= f0 - 1e-4 * alpha * dec:
                accepted = True
                break
            alpha *= 0.5
        if not accepted:
            break
        lam[:] = trial
    return it


@njit(cache=True)
def _coupled(A, b, kind, weight, bs, bn, bnorm, bmu, t, lam, R, K):
    """The coupled residual ``R(lam)`` (m,), in velocity units, and its Jacobian ``K = dR/dlam``
    (m, m), with ``c = A lam + b`` and friction radii ``s = mu lam_n`` moving with the normal
    impulses: ``c_n - t w / lam_n`` (normal rows), ``c_T + 2 t lam_T / (s^2 - |lam_T|^2)`` (friction
    blocks), ``lam_t`` (frictionless tangent rows). Requires an interior ``lam``."""
    m = b.shape[0]
    c = A @ lam + b
    K[:, :] = 0.0
    for i in range(m):
        if kind[i] == NORMAL:
            R[i] = c[i] - t * weight[i] / lam[i]
            for k in range(m):
                K[i, k] = A[i, k]
            K[i, i] += t * weight[i] / (lam[i] * lam[i])
        else:
            R[i] = lam[i]
            K[i, i] = 1.0
    for k in range(bs.shape[0]):
        n = bnorm[k]
        s = bmu[k] * lam[n]
        t2 = 0.0
        for i in range(bs[k], bs[k] + bn[k]):
            t2 += lam[i] * lam[i]
        D = s * s - t2
        for i in range(bs[k], bs[k] + bn[k]):
            R[i] = c[i] + 2.0 * t * lam[i] / D
            for j in range(m):
                K[i, j] = A[i, j]
            for j in range(bs[k], bs[k] + bn[k]):
                K[i, j] += 4.0 * t * lam[i] * lam[j] / (D * D)
            K[i, i] += 2.0 * t / D
            K[i, n] -= 4.0 * t * lam[i] * s * bmu[k] / (D * D)


@njit(cache=True)
def _inside(kind, bs, bn, bnorm, bmu, lam):
    for i in range(lam.shape[0]):
        if kind[i] == NORMAL and lam[i] <= 0.0:
            return False
    for k in range(bs.shape[0]):
        t2 = 0.0
        for i in range(bs[k], bs[k] + bn[k]):
            t2 += lam[i] * lam[i]
        if t2 >= (bmu[k] * lam[bnorm[k]]) ** 2:
            return False
    return True


@njit(cache=True)
def _solve(A, b, kind, weight, bs, bn, bnorm, bmu, kappa, lam, t0, max_iter, tol):
    """Path following on ``t`` from ``t0`` down to ``kappa`` (barrier Newton, friction radii following
    each stage), then, at ``kappa``, coupled Newton steps kept when they lower the residual, else
    fixed-point steps on the radii. ``lam`` in place; returns (iterations, residual norm)."""
    m = b.shape[0]
    nb = bs.shape[0]
    s = np.empty(nb)
    for k in range(nb):
        s[k] = bmu[k] * lam[bnorm[k]]
    total = 0
    t = t0
    while True:
        total += _barrier_newton(A, b, kind, weight, bs, bn, s, t, lam, 50, 1e-7 * tol)
        for k in range(nb):
            s[k] = bmu[k] * lam[bnorm[k]]
        if t <= kappa:
            break
        t = max(kappa, 0.1 * t)
    R = np.empty(m)
    Rt = np.empty(m)
    K = np.empty((m, m))
    Kt = np.empty((m, m))
    norm = np.inf
    for _ in range(max_iter):
        _coupled(A, b, kind, weight, bs, bn, bnorm, bmu, kappa, lam, R, K)
        norm = np.sqrt(np.sum(R * R))
        if norm <= tol:
            return total, norm
        total += 1
        d = _lin_solve(K, -R)
        alpha = 1.0
        moved = False
        for _ in range(30):  # coupled Newton, backtracking inside the domain on |R|
            trial = lam + alpha * d
            if _inside(kind, bs, bn, bnorm, bmu, trial):
                _coupled(A, b, kind, weight, bs, bn, bnorm, bmu, kappa, trial, Rt, Kt)
                if np.sqrt(np.sum(Rt * Rt)) <= (1.0 - 1e-4 * alpha) * norm:
                    lam[:] = trial
                    moved = True
                    break
            alpha *= 0.5
        if not moved:  # a fixed-point step on the friction radii
            for k in range(nb):
                s[k] = bmu[k] * lam[bnorm[k]]
            total += _barrier_newton(A, b, kind, weight, bs, bn, s, kappa, lam, 50, 1e-7 * tol)
    _coupled(A, b, kind, weight, bs, bn, bnorm, bmu, kappa, lam, R, K)
    return total, np.sqrt(np.sum(R * R))


def _start(p: RelaxedProblem):
    """A strictly interior cold start and its central-path parameter: ``lambda_n`` of the size
    ``-b_n / A_nn`` an impulse needs to stop an approach (or small), no friction."""
    m = len(p.b)
    scale = 1e-3 * (1.0 + np.abs(p.b).max())
    lam = np.zeros(m)
    normal = p.kind == NORMAL
    diag = np.maximum(np.diag(p.A)[normal], 1e-12 * (1.0 + np.abs(np.diag(p.A)).max()))
    lam[normal] = (np.maximum(-p.b[normal], 0.0) + scale) / diag
    c = np.maximum(p.b[normal], scale)
    t0 = max(p.kappa, float(np.sum(lam[normal] * c) / np.sum(p.weight[normal])) if normal.any() else p.kappa)
    return lam, t0


def relaxed_residual(p: RelaxedProblem, lam: np.ndarray) -> np.ndarray:
    """The optimality residual (m,) at interior impulses ``lam`` (``c = A lambda + b``), in velocity
    units: ``c_n - kappa w / lambda_n`` on normal rows, ``c_T + 2 kappa lambda_T / (s^2 - |lambda_T|^2)``
    on friction rows (``s = mu lambda_n``), ``lambda_t`` on frictionless tangent rows. Zero exactly at
    the relaxed solution (the central-path equations of the module docstring divided by
    ``lambda_n`` and by ``s^2 - |lambda_T|^2``)."""
    keep = _active(p)
    q = _restrict(p, keep)
    lam = np.asarray(lam, dtype=float)
    R = np.zeros(len(p.b))
    Rk = np.empty(len(keep))
    _coupled(q.A, q.b, q.kind, q.weight, *friction_blocks(q), q.kappa, lam[keep], Rk, np.empty((len(keep), len(keep))))
    R[keep] = Rk
    others = np.setdiff1d(np.arange(len(p.b)), keep)
    R[others] = lam[others]  # rows left out carry no impulse
    return R


def _restrict(p: RelaxedProblem, keep: np.ndarray) -> RelaxedProblem:
    """The problem on the rows ``keep`` (row references renumbered)."""
    new = -np.ones(len(p.b), dtype=np.int64)
    new[keep] = np.arange(len(keep))
    return RelaxedProblem(np.ascontiguousarray(p.A[np.ix_(keep, keep)]), p.b[keep].copy(), p.kind[keep].copy(),
                          new[p.normal_of[keep]], new[p.block_start[keep]], p.block_size[keep].copy(),
                          p.mu[keep].copy(), p.weight[keep].copy(), p.dweight[keep].copy(), p.kappa)


def _active(p: RelaxedProblem) -> np.ndarray:
    """Rows that take part: normal rows whose fade ``w`` is not negligible (pairs at the very edge of
    the smoothing distance, where the force ``kappa w / c`` and its derivative vanish, are left out)
    and their friction rows."""
    normal = p.kind == NORMAL
    on = ~normal | (p.weight > WEIGHT_FLOOR)
    on &= on[p.normal_of]
    return np.flatnonzero(on)


def solve_relaxed(p: RelaxedProblem, guess: np.ndarray | None = None, *, max_iter: int = 100) -> RelaxedSolution:
    """Solve the relaxed problem (``kappa > 0``); ``guess``, the previous step's impulses for the same
    rows, is tried first. Raises ``ValueError`` on ``kappa <= 0`` or non-finite data."""
    if not p.kappa > 0.0:
        raise ValueError(f"the relaxed contact model needs kappa > 0, got {p.kappa!r} (kappa = 0 is the hard model)")
    m = len(p.b)
    if not np.isfinite(p.A.sum() + p.b.sum()):
        raise ValueError("solve_relaxed: A or b contains non-finite values")
    keep = _active(p)
    full = p
    p = _restrict(p, keep) if len(keep) < m else p
    n = len(keep)
    lam_full = np.zeros(m)
    if n == 0:
        return RelaxedSolution(lam_full, full.b.copy(), 0, 0.0, True, np.zeros((0, 0)), keep=keep)
    blocks = friction_blocks(p)
    args = (p.A, p.b, p.kind, p.weight, *blocks, p.kappa)
    tol = TOLERANCE * (1.0 + np.abs(p.b).max())
    best = None
    if guess is not None and len(guess) == m:
        lam = np.array(guess, dtype=float)[keep]
        if _inside(p.kind, *blocks, lam):
            its, norm = _solve(*args, lam, p.kappa, 20, tol)
            best = (lam, its, norm, True)
    if best is None or best[2] > tol:
        lam, t0 = _start(p)
        its, norm = _solve(*args, lam, t0, max_iter, tol)
        if best is None or norm < best[2]:
            best = (lam, its, norm, False)
    lam, its, norm, warm = best
    K = np.empty((n, n))
    _coupled(p.A, p.b, p.kind, p.weight, *blocks, p.kappa, lam, np.empty(n), K)
    lam_full[keep] = lam
    return RelaxedSolution(lam_full, full.A @ lam_full + full.b, its, float(norm), bool(norm <= 1e6 * tol), K,
                           warm_start_hit=warm and norm <= tol, keep=keep)


def auto_schedule(weight: float, distances=(3e-2, 1e-2, 3e-3, 1e-3, 3e-4)) -> list[float]:
    """The continuation schedule ``kappa = weight * d`` for hover distances ``d`` (m), then 0 (hard).

    ``weight`` is a typical body's weight (N), so every stage means the same thing on every model:
    a resting body floats about ``d`` above its support.
    """
    if not (np.isfinite(weight) and weight > 0):
        raise ValueError(f"the schedule's weight must be positive and finite, got {weight!r}")
    return [float(weight * d) for d in distances] + [0.0]


class CentralPathError(RuntimeError):
    """The relaxed solve found no point on the central path (the simulator then takes the step
    with hard contact)."""


class RelaxedAdapter:
    """The relaxed model as a contact adapter (:mod:`contact.adapter`): central-path parameter
    ``kappa > 0``, forces fading out at ``distance`` (m), friction by one barrier per contact
    (``cone=True``, the Coulomb cone) or per tangent row (the pyramid)."""

    name = "relaxed"

    def __init__(self, kappa: float, distance: float, cone: bool):
        self.kappa, self.distance, self.cone = float(kappa), float(distance), bool(cone)

    def problem(self, A, b, layout, phi, previous=None) -> RelaxedProblem:
        """The relaxed problem on the rows of ``layout``; ``phi`` (nc + nlim,) the distances of its
        normal rows (contacts, then limits)."""
        m = layout.m
        rows = layout.normal_rows
        w, dw = fade(phi, self.distance)
        weight = np.zeros(m)
        dweight = np.zeros(m)
        weight[rows] = w
        dweight[rows] = dw
        return RelaxedProblem(A, b, *rows_of(layout, self.cone),
                              weight=weight, dweight=dweight, kappa=self.kappa)

    def solve(self, p: RelaxedProblem, guess: RelaxedSolution | None = None) -> RelaxedSolution:
        """Raises :class:`CentralPathError` when Newton's method does not converge."""
        sol = solve_relaxed(p, guess=None if guess is None else guess.lam)
        if not sol.converged:
            raise CentralPathError(f"the relaxed contact solve did not converge (residual {sol.residual:.3g} "
                               f"after {sol.iterations} Newton iterations, kappa {p.kappa:g})")
        return sol

    def residual(self, p: RelaxedProblem, lam) -> np.ndarray:
        return relaxed_residual(p, lam)

    def linearize(self, p: RelaxedProblem, sol: RelaxedSolution) -> Linearization:
        """:func:`relaxed_residual` at the solution, over the rows that take part (``sol.keep``):
        ``F_lambda + F_c A`` is the Newton matrix ``sol.K`` (regular), ``F_c = I`` on the normal and
        friction-block rows (0 on frictionless tangent rows, ``F = lambda_t``), and
        ``F_phi = -kappa w'(phi) / lambda_n`` on the normal rows."""
        keep = sol.keep
        m, k = len(p.b), len(keep)
        q = _restrict(p, keep) if k < m else p
        lam = sol.lam[keep]
        in_block = np.zeros(k, dtype=bool)
        for st, sz, _, _ in zip(*friction_blocks(q), strict=True):
            in_block[st:st + sz] = True
        Fc = np.zeros((k, m))
        Fc[np.arange(k), keep] = 1.0
        Fc[(q.kind == FRICTION) & ~in_block] = 0.0
        normal = np.flatnonzero(q.kind == NORMAL)
        Fphi = np.zeros((k, m))
        Fphi[normal, keep[normal]] = -q.kappa * q.dweight[normal] / lam[normal]
        return Linearization(E=sol.K, Fc=Fc, unknowns=keep, Fphi=Fphi, regular=True)

    def contact_modes(self, sol: RelaxedSolution, layout) -> np.ndarray:
        """No modes on the central path: zeros (nc,)."""
        return np.zeros(layout.nc, dtype=np.int64)

    def reclassify(self, p, sol, dl_dlam):
        """Nothing to reclassify (the relaxed Jacobian already sees contacts not yet made): None."""
        return None
