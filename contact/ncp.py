"""The frictional contact problem with the Coulomb cone (NCP, second paper), exact at its answer.

Rows come in groups: a contact is ``(n, t1, t2)`` (3-D) or ``(n, t)`` (planar)
with friction coefficient ``mu``; a joint limit is a lone unilateral row. With
``c = A lambda + b`` (``A`` the Delassus matrix, PSD, often rank-deficient) each
contact satisfies Coulomb's law with the De Saxce correction::

    lambda in K_mu = {lambda_n >= 0, |lambda_T| <= mu lambda_n}
    c + (mu |c_T|, 0) in K_mu*,   lambda . (c + (mu |c_T|, 0)) = 0

i.e. exactly one of

- *breaking*: ``lambda = 0`` and ``c_n >= 0``;
- *sticking*: ``c = 0`` and ``lambda`` inside the cone;
- *sliding*: ``c_n = 0``, ``c_T != 0`` and ``lambda_T = -mu lambda_n c_T / |c_T|`` (on the cone's
  boundary, opposite to the slip).

A unilateral row is breaking (``lambda = 0``, ``c >= 0``) or sticking (``c = 0``, ``lambda >= 0``).

Method: the previous step's modes are tried first (warm start): Newton's method on
the equations of those modes, from the previous impulses, and the answer is
accepted if it satisfies the law. Otherwise a blocked projected Gauss-Seidel
with an *exact* per-contact solve (break, else stick, else slide: a 1-D root in
the slip direction) finds the modes, and Newton on their equations makes the
answer exact. Newton steps are least-squares minimal-norm, so rank-deficient
problems (a box flat on the ground) get well-defined impulses; where such a family
of answers changes the motion (a flat box sliding with spin), its canonical vertex
is returned (:func:`_canonical_vertex`), so the answer does not depend on the warm start. A problem
Newton cannot settle returns the Gauss-Seidel iterate with status
``"inexact"``; nothing returns NaN.

:func:`ncp_residual` is the optimality residual: per contact,
``|lambda - P_K(lambda - rho (c + mu |c_T| e_n))|`` with ``rho = 1 / G_nn``, zero
exactly at a solution.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np
from numba import njit

from .adapter import Linearization


class NCPMode(enum.IntEnum):
    """Mode of a contact (or of a unilateral row) at an NCP solution.

    ``SATURATED``: at rest with its friction on the cone's boundary in a fixed
    direction ``d`` (impending slip) -- where the load of a statically
    indeterminate patch (a flat foot) is split so that one corner is at its
    friction limit. Both sticking and sliding hold at once there.
    """

    BREAKING = 0
    STICKING = 1
    SLIDING = 2
    SATURATED = 3


@dataclass
class NCPSolution:
    """``lam`` impulses (m,), ``c`` velocities (m,), ``modes`` per group, ``status`` (``"solved"``
    or ``"inexact"``), ``residual`` (:func:`ncp_residual`), ``warm_start_hit``, ``iterations``
    (Gauss-Seidel sweeps + Newton steps)."""

    lam: np.ndarray
    c: np.ndarray
    modes: np.ndarray
    status: str
    residual: float
    warm_start_hit: bool
    iterations: int
    dirs: np.ndarray | None = None  # (ng, 2) friction directions of SATURATED groups

    @property
    def x(self) -> np.ndarray:
        """Alias of :attr:`lam` (the impulses (m,), this field's former name); read-only."""
        return self.lam


@dataclass
class NCPProblem:
    """``A`` (m, m) Delassus matrix, ``b`` (m,) free contact velocity; row groups ``start``,
    ``size`` (1, 2 or 3 rows) and ``mu`` (one per group), as :func:`solve_ncp` takes them."""

    A: np.ndarray
    b: np.ndarray
    start: np.ndarray
    size: np.ndarray
    mu: np.ndarray

    @classmethod
    def of(cls, A, b, start, size, mu) -> "NCPProblem":
        return cls(*_arrays(A, b, start, size, mu))


# -- cone geometry --------------------------------------------------------------------------------
@njit(cache=True)
def _project_cone(lam, mu, size, out):
    """Projection of a group's impulse on K_mu (size 1: the half-line)."""
    ln = lam[0]
    if size == 1:
        out[0] = max(ln, 0.0)
        return
    tn = 0.0
    for k in range(1, size):
        tn += lam[k] * lam[k]
    tn = np.sqrt(tn)
    if ln >= 0.0 and tn <= mu * ln:  # inside the cone
        for k in range(size):
            out[k] = lam[k]
    elif mu * tn <= -ln or tn == 0.0:  # inside the polar cone
        for k in range(size):
            out[k] = 0.0
    else:
        a = (ln + mu * tn) / (1.0 + mu * mu)
        out[0] = a
        for k in range(1, size):
            out[k] = mu * a * lam[k] / tn


@njit(cache=True)
def _natural_map(A, b, start, size, mu, lam, R):
    """``R`` (m,) = ``lambda - P_K(lambda - rho (c + mu |c_T| e_n))`` group by group (module docstring)."""
    c = A @ lam + b
    tmp = np.empty(3)
    out = np.empty(3)
    for g in range(start.shape[0]):
        s, n = start[g], size[g]
        rho = 1.0 / max(A[s, s], 1e-300)
        ct = 0.0
        for k in range(1, n):
            ct += c[s + k] * c[s + k]
        ct = np.sqrt(ct)
        for k in range(n):
            tmp[k] = lam[s + k] - rho * c[s + k]
        tmp[0] -= rho * mu[g] * ct
        _project_cone(tmp[:n], mu[g], n, out[:n])
        for k in range(n):
            R[s + k] = lam[s + k] - out[k]


@njit(cache=True)
def _residual(A, b, start, size, mu, lam):
    R = np.zeros(b.shape[0])
    _natural_map(A, b, start, size, mu, lam, R)
    worst = 0.0
    for i in range(R.shape[0]):
        worst = max(worst, abs(R[i]))
    return worst


def ncp_residual(A, b, start, size, mu, lam) -> float:
    """The natural-map residual (see the module docstring); 0 exactly at a solution."""
    if len(b) == 0:
        return 0.0
    return float(_residual(np.ascontiguousarray(A), np.ascontiguousarray(b), start, size, mu,
                           np.ascontiguousarray(lam, dtype=float)))


# -- the exact one-contact solve ------------------------------------------------------------------
@njit(cache=True)
def _local_solve(Ag, bt, mu, n, out):
    """Exact Coulomb solve of one group: ``c = Ag lambda + bt`` (``Ag`` the group's diagonal block of ``A``);
    writes lambda to ``out``."""
    if n == 1:
        out[0] = max(0.0, -bt[0] / Ag[0, 0]) if Ag[0, 0] > 0 else 0.0
        return
    if bt[0] >= 0.0:  # breaking
        for k in range(n):
            out[k] = 0.0
        return
    if mu == 0.0:
        out[0] = -bt[0] / Ag[0, 0] if Ag[0, 0] > 0 else 0.0
        for k in range(1, n):
            out[k] = 0.0
        return
    # sticking
    det = np.linalg.det(Ag[:n, :n])
    if abs(det) > 1e-14 * max(1.0, abs(Ag[0, 0])) ** n:
        lam = np.linalg.solve(Ag[:n, :n], -bt[:n])
        tn = 0.0
        for k in range(1, n):
            tn += lam[k] * lam[k]
        if lam[0] >= 0.0 and np.sqrt(tn) <= mu * lam[0]:
            for k in range(n):
                out[k] = lam[k]
            return
    # sliding: lambda = ln (1, -mu u), |u| = 1, with c_n = 0 and c_T parallel to u
    if n == 2:
        for s in (1.0, -1.0):
            den = Ag[0, 0] - mu * Ag[0, 1] * s
            if den <= 0:
                continue
            ln = -bt[0] / den
            ctt = ln * (Ag[1, 0] - mu * Ag[1, 1] * s) + bt[1]
            if ln >= 0 and ctt * s > 0:
                out[0], out[1] = ln, -mu * ln * s
                return
    else:
        best_th, found = 0.0, False
        nscan = 64
        fprev, thprev, okprev = 0.0, 0.0, False
        for i in range(nscan + 1):
            th = 2.0 * np.pi * i / nscan
            f, ok = _slide_f(Ag, bt, mu, th)
            if i > 0 and ok and okprev and f * fprev <= 0.0:
                lo, hi, flo = thprev, th, fprev
                for _ in range(60):
                    mid = 0.5 * (lo + hi)
                    fm, okm = _slide_f(Ag, bt, mu, mid)
                    if (fm <= 0.0) == (flo <= 0.0):
                        lo, flo = mid, fm
                    else:
                        hi = mid
                best_th, found = 0.5 * (lo + hi), True
                break
            fprev, thprev, okprev = f, th, ok
        if found:
            u0, u1 = np.cos(best_th), np.sin(best_th)
            den = Ag[0, 0] - mu * (Ag[0, 1] * u0 + Ag[0, 2] * u1)
            ln = -bt[0] / den
            out[0], out[1], out[2] = ln, -mu * ln * u0, -mu * ln * u1
            return
    # fallback: one projected step
    tmp = np.empty(n)
    for k in range(n):
        ck = bt[k]
        for j in range(n):
            ck += Ag[k, j] * out[j]
        tmp[k] = out[k] - ck / Ag[0, 0]
    _project_cone(tmp, mu, n, out)


@njit(cache=True)
def _slide_f(Ag, bt, mu, th):
    """Sliding consistency at slip direction (cos th, sin th): cross(c_T, u), and whether
    lambda_n > 0 and c_T points along u."""
    u0, u1 = np.cos(th), np.sin(th)
    den = Ag[0, 0] - mu * (Ag[0, 1] * u0 + Ag[0, 2] * u1)
    if den <= 0:
        return 0.0, False
    ln = -bt[0] / den
    c1 = ln * (Ag[1, 0] - mu * (Ag[1, 1] * u0 + Ag[1, 2] * u1)) + bt[1]
    c2 = ln * (Ag[2, 0] - mu * (Ag[2, 1] * u0 + Ag[2, 2] * u1)) + bt[2]
    return c1 * u1 - c2 * u0, (ln > 0 and c1 * u0 + c2 * u1 > 0)


@njit(cache=True)
def _pgs(A, b, start, size, mu, lam, max_sweeps, tol):
    ng = start.shape[0]
    Ag = np.empty((3, 3))
    bt = np.empty(3)
    new = np.empty(3)
    scale = 1.0 + np.abs(b).max()
    for sweep in range(max_sweeps):
        change = 0.0
        for g in range(ng):
            s, n = start[g], size[g]
            for i in range(n):
                acc = b[s + i]
                for j in range(A.shape[0]):
                    acc += A[s + i, j] * lam[j]
                for k in range(n):
                    acc -= A[s + i, s + k] * lam[s + k]
                    Ag[i, k] = A[s + i, s + k]
                bt[i] = acc
            for k in range(n):
                new[k] = lam[s + k]
            _local_solve(Ag, bt, mu[g], n, new)
            for k in range(n):
                change = max(change, abs(new[k] - lam[s + k]) * max(A[s + k, s + k], 1e-300))
                lam[s + k] = new[k]
        if change <= tol * scale:
            return sweep + 1
    return max_sweeps


# -- modes and Newton on their equations ----------------------------------------------------------
@njit(cache=True)
def _modes(A, b, start, size, mu, lam, tol_c, tol_l):
    c = A @ lam + b
    modes = np.zeros(start.shape[0], dtype=np.int64)
    for g in range(start.shape[0]):
        s, n = start[g], size[g]
        if lam[s] <= tol_l:
            modes[g] = 0
            continue
        ct = 0.0
        for k in range(1, n):
            ct += c[s + k] * c[s + k]
        if n == 1:
            modes[g] = 1
        elif mu[g] == 0.0:
            modes[g] = 2  # frictionless: lambda_T = 0, the tangential velocity is free
        elif np.sqrt(ct) <= tol_c:
            modes[g] = 1
        else:
            modes[g] = 2
    return modes


@njit(cache=True)
def _mode_equations(A, b, start, size, mu, modes, dirs, lam, F, Fl, Fc, jac=True):
    """The mode equations ``F(lambda; c)`` (m,) with ``c = A lambda + b``, and their partial
    derivatives ``Fl = dF/dlambda`` at fixed ``c`` and ``Fc = dF/dc`` (m, m each).

    Per group: breaking ``lambda = 0``; sticking ``c = 0``; sliding ``c_n = 0`` and
    ``lambda_T + mu lambda_n c_T/|c_T| = 0`` (frictionless: ``lambda_T = 0``); saturated
    ``c_n = 0`` and ``lambda_T = mu lambda_n d`` (``dirs`` (ng, 2): its friction direction).
    The one definition behind Newton's method (:func:`_equations`) and the implicit Jacobian
    (:meth:`NCPAdapter.linearize`). ``jac=False``: ``F`` only (``Fl``, ``Fc`` untouched; the line search).
    """
    c = A @ lam + b
    if jac:
        Fl[:] = 0.0
        Fc[:] = 0.0
    for g in range(start.shape[0]):
        s, n = start[g], size[g]
        md = modes[g]
        if md == 0:
            for k in range(n):
                F[s + k] = lam[s + k]
                if jac:
                    Fl[s + k, s + k] = 1.0
        elif md == 3:  # saturated: c_n = 0, lambda_T = mu lambda_n d
            F[s] = c[s]
            if jac:
                Fc[s, s] = 1.0
            for k in range(1, n):
                F[s + k] = lam[s + k] - mu[g] * lam[s] * dirs[g, k - 1]
                if jac:
                    Fl[s + k, s + k] = 1.0
                    Fl[s + k, s] = -mu[g] * dirs[g, k - 1]
        elif md == 1 or (md == 2 and mu[g] == 0.0):
            rows = n if md == 1 else 1
            for k in range(rows):
                F[s + k] = c[s + k]
                if jac:
                    Fc[s + k, s + k] = 1.0
            for k in range(rows, n):  # frictionless sliding: lambda_T = 0
                F[s + k] = lam[s + k]
                if jac:
                    Fl[s + k, s + k] = 1.0
        else:
            F[s] = c[s]
            if jac:
                Fc[s, s] = 1.0
            ct = 0.0
            for k in range(1, n):
                ct += c[s + k] * c[s + k]
            ct = max(np.sqrt(ct), 1e-300)
            ln = lam[s]
            for k in range(1, n):
                uk = c[s + k] / ct
                F[s + k] = lam[s + k] + mu[g] * ln * uk
                if jac:
                    Fl[s + k, s + k] = 1.0
                    Fl[s + k, s] = mu[g] * uk
                    # d(u_k)/dc_T = (delta - u u^T)_k / |c_T|
                    for kk in range(1, n):
                        Fc[s + k, s + kk] = mu[g] * ln * ((1.0 if kk == k else 0.0) - uk * c[s + kk] / ct) / ct


@njit(cache=True)
def _equations(A, b, start, size, mu, modes, dirs, lam, F, JF):
    """The mode equations ``F(lambda)`` and their Jacobian ``JF = Fl + Fc A`` (m x m) for Newton."""
    m = b.shape[0]
    Fl = np.empty((m, m))
    Fc = np.empty((m, m))
    _mode_equations(A, b, start, size, mu, modes, dirs, lam, F, Fl, Fc)
    JF[:] = Fl + Fc @ A


@njit(cache=True)
def _linearization(A, b, start, size, mu, modes, dirs, lam):
    """``(E, Fc, act)``: the mode equations on the rows ``act`` of the groups in contact, ``E`` the
    derivative of those equations with respect to the impulses of those rows (``Fl + Fc A``), ``Fc``
    their derivative with respect to ``c`` (all m columns)."""
    m = b.shape[0]
    F = np.empty(m)
    Fl = np.empty((m, m))
    Fc = np.empty((m, m))
    _mode_equations(A, b, start, size, mu, modes, dirs, lam, F, Fl, Fc)
    na = 0
    for g in range(start.shape[0]):
        if modes[g] != 0:
            na += size[g]
    act = np.empty(na, dtype=np.int64)
    a = 0
    for g in range(start.shape[0]):
        if modes[g] != 0:
            for k in range(size[g]):
                act[a] = start[g] + k
                a += 1
    Fca = np.empty((na, m))
    for e in range(na):
        Fca[e] = Fc[act[e]]
    JF = Fca @ A
    E = np.empty((na, na))
    for e in range(na):
        for a in range(na):
            E[e, a] = Fl[act[e], act[a]] + JF[e, act[a]]
    return E, Fca, act


@njit(cache=True)
def _newton(A, b, start, size, mu, modes, dirs, lam, max_iter, tol):
    """Damped Newton on the mode equations (:func:`_newton_core`), in place on ``lam``.

    The impulses of breaking groups are set to their answer, zero, and Newton runs on the
    rows of the other groups only (``c`` of those rows is ``G_aa lambda_a + b_a`` then): the
    same equations and the same tolerance (on the scale of the whole ``b``), on a smaller system.
    """
    scale = 1.0 + np.abs(b).max()
    ng = start.shape[0]
    na, nga = 0, 0
    for g in range(ng):
        if modes[g] != 0:
            na += size[g]
            nga += 1
        else:
            for k in range(size[g]):
                lam[start[g] + k] = 0.0
    if na == 0:
        return 0, True
    act = np.empty(na, dtype=np.int64)
    start_a = np.empty(nga, dtype=np.int64)
    size_a = np.empty(nga, dtype=np.int64)
    mu_a = np.empty(nga)
    modes_a = np.empty(nga, dtype=np.int64)
    dirs_a = np.empty((nga, 2))
    i, ga = 0, 0
    for g in range(ng):
        if modes[g] == 0:
            continue
        start_a[ga], size_a[ga], mu_a[ga], modes_a[ga] = i, size[g], mu[g], modes[g]
        dirs_a[ga, 0], dirs_a[ga, 1] = dirs[g, 0], dirs[g, 1]
        for k in range(size[g]):
            act[i] = start[g] + k
            i += 1
        ga += 1
    Aa = np.empty((na, na))
    ba = np.empty(na)
    la = np.empty(na)
    for e in range(na):
        ba[e] = b[act[e]]
        la[e] = lam[act[e]]
        for f in range(na):
            Aa[e, f] = A[act[e], act[f]]
    its, ok = _newton_core(Aa, ba, start_a, size_a, mu_a, modes_a, dirs_a, la, max_iter, tol, scale)
    for e in range(na):
        lam[act[e]] = la[e]
    return its, ok


#: Newton gives up when ``|F|`` has not halved over this many iterations (modes with no solution).
STALL_WINDOW = 8
#: A converged Newton answer whose residual is above this (relative to the scale of b) takes one more
#: full step. The tolerance alone left impulses ~1e-9 off the exact solution: below what a central
#: difference of the step with a small h resolves, so such differences saw no friction-direction change
#: at all (dv+/dv = 1 for a sliding rod; the analytic 0.971 is right, see tests/test_rods.py).
POLISH = 1e-15


@njit(cache=True)
def _newton_core(A, b, start, size, mu, modes, dirs, lam, max_iter, tol, scale):
    """Damped Newton on the mode equations: least-squares steps, backtracking on |F| (``F`` only in
    the line search), converged at ``|F| <= tol * scale``; gives up when ``|F|`` stalls
    (:data:`STALL_WINDOW`): the modes have no solution and the caller repairs them.

    The sliding equations also vanish on the mirror cone (lambda_n < 0); the
    backtracking keeps the iterate on the side it starts from when that does not
    cost progress, and the caller's validity check rejects the mirror anyway.
    """
    m = b.shape[0]
    F = np.empty(m)
    JF = np.empty((m, m))
    Ft = np.empty(m)
    dummy = np.empty((0, 0))
    trial = np.empty(m)
    hist = np.empty(max_iter + 1)
    stalls = 0
    for it in range(max_iter):
        _equations(A, b, start, size, mu, modes, dirs, lam, F, JF)
        f0 = np.abs(F).max()
        hist[it] = f0
        if f0 <= tol * scale:
            if f0 > POLISH * scale:  # one more full step: Newton's quadratic rate takes the residual to round-off
                step = np.linalg.lstsq(JF, -F, 1e-12)[0]
                for i in range(m):
                    trial[i] = lam[i] + step[i]
                _mode_equations(A, b, start, size, mu, modes, dirs, trial, Ft, dummy, dummy, False)
                if np.abs(Ft).max() < f0:
                    for i in range(m):
                        lam[i] = trial[i]
            return it, True
        if it >= STALL_WINDOW and f0 > 0.5 * hist[it - STALL_WINDOW]:
            return it, False
        step = np.linalg.lstsq(JF, -F, 1e-12)[0]
        alpha = 1.0
        accepted = False
        for _ in range(30):
            for i in range(m):
                trial[i] = lam[i] + alpha * step[i]
            _mode_equations(A, b, start, size, mu, modes, dirs, trial, Ft, dummy, dummy, False)
            if np.abs(Ft).max() < (1.0 - 1e-4 * alpha) * f0:
                accepted = True
                break
            alpha *= 0.5
        if accepted:
            stalls = 0
            for i in range(m):
                lam[i] = trial[i]
        else:  # no decrease along the direction: take the full step (it can leave a kink), a few times
            stalls += 1
            if stalls > 3:
                return it, False
            for i in range(m):
                lam[i] += step[i]
    _mode_equations(A, b, start, size, mu, modes, dirs, lam, F, dummy, dummy, False)
    return max_iter, np.abs(F).max() <= tol * scale


@njit(cache=True)
def _valid(A, b, start, size, mu, modes, dirs, lam, tol_c, tol_l):
    """The impulses satisfy Coulomb's law in the given modes (to tolerance)."""
    c = A @ lam + b
    for g in range(start.shape[0]):
        s, n = start[g], size[g]
        md = modes[g]
        if md == 0:
            if c[s] < -tol_c:
                return False
        else:
            if lam[s] < -tol_l:
                return False
            if n > 1 and md == 1:
                tn = 0.0
                for k in range(1, n):
                    tn += lam[s + k] * lam[s + k]
                if np.sqrt(tn) > mu[g] * lam[s] + tol_l:
                    return False
            if md == 2 and mu[g] > 0.0:
                ct = 0.0
                for k in range(1, n):
                    ct += c[s + k] * c[s + k]
                if np.sqrt(ct) <= tol_c:
                    return False
            if md == 3:  # no slip, or slip against the friction direction only
                along = 0.0
                for k in range(1, n):
                    along += c[s + k] * dirs[g, k - 1]
                if along > tol_c:
                    return False
                for k in range(1, n):
                    if abs(c[s + k] - along * dirs[g, k - 1]) > tol_c:
                        return False
    return True


@njit(cache=True)
def _repair(A, b, start, size, mu, modes, dirs, lam, tol_c, tol_l):
    """Modes implied by the violations of an answer: take-off when the normal impulse went
    negative, contact when a breaking contact penetrates, sliding when a sticking impulse
    left the cone, sticking when a sliding contact stopped."""
    c = A @ lam + b
    new = modes.copy()
    for g in range(start.shape[0]):
        s, n = start[g], size[g]
        md = modes[g]
        if md == 0:
            if c[s] < -tol_c:
                new[g] = 1 if (n == 1 or mu[g] > 0.0) else 2
        elif lam[s] < -tol_l:
            new[g] = 0
        elif md == 1 and n > 1:
            tn = 0.0
            for k in range(1, n):
                tn += lam[s + k] * lam[s + k]
            if np.sqrt(tn) > mu[g] * lam[s] + tol_l:
                new[g] = 2
        elif md == 2 and mu[g] > 0.0:
            ct = 0.0
            for k in range(1, n):
                ct += c[s + k] * c[s + k]
            if np.sqrt(ct) <= tol_c:
                # stopped while on the boundary: saturated along its friction direction
                tn = 0.0
                for k in range(1, n):
                    tn += lam[s + k] * lam[s + k]
                tn = np.sqrt(tn)
                if tn > 0.0:
                    new[g] = 3
                    for k in range(1, n):
                        dirs[g, k - 1] = lam[s + k] / tn
                else:
                    new[g] = 1
        elif md == 3:
            along = 0.0
            for k in range(1, n):
                along += c[s + k] * dirs[g, k - 1]
            if along > tol_c:
                new[g] = 1
            else:
                for k in range(1, n):
                    if abs(c[s + k] - along * dirs[g, k - 1]) > tol_c:
                        new[g] = 2
    return new


def _accept(A, b, start, size, mu, modes, dirs, lam, converged, tol_c, tol_l):
    """Newton's answer is taken when it obeys the law, and its mode equations hold exactly or to
    within ``ACCEPT`` of the scale (a tied contact can leave them inconsistent at round-off level)."""
    if not np.all(np.isfinite(lam)) or not _valid(A, b, start, size, mu, modes, dirs, lam, tol_c, tol_l):
        return False
    if converged:
        return True
    m = len(b)
    F = np.empty(m)
    JF = np.empty((m, m))
    _equations(A, b, start, size, mu, modes, dirs, lam, F, JF)
    return np.abs(F).max() <= ACCEPT * (1.0 + np.abs(b).max())


#: Largest residual of the mode equations (relative to the scale of b) an answer may keep.
ACCEPT = 1e-8


def _arrays(A, b, start, size, mu):
    """The problem's arrays as contiguous float64 / int64 (what the kernels take)."""
    return (np.ascontiguousarray(A, dtype=float), np.ascontiguousarray(b, dtype=float),
            np.ascontiguousarray(start, dtype=np.int64), np.ascontiguousarray(size, dtype=np.int64),
            np.ascontiguousarray(mu, dtype=float))


def solve_ncp(A, b, start, size, mu, *, guess=None, tol: float = 1e-10, max_sweeps: int = 2000) -> NCPSolution:
    """Solve the contact NCP (see the module docstring).

    ``A`` (m, m), ``b`` (m,); groups given by ``start``, ``size`` (1, 2 or 3 rows) and
    ``mu`` (one per group). ``guess = (modes, lam)`` from the previous step, when the
    groups are the same, is tried first (``(modes, lam, dirs)`` also carries the friction
    directions of saturated groups). An indeterminate sliding answer is replaced by its
    canonical vertex (:func:`_canonical_vertex`).
    """
    sol = _solve_ncp(A, b, start, size, mu, guess=guess, tol=tol, max_sweeps=max_sweeps)
    if sol.status == "solved" and np.any(sol.modes == NCPMode.SLIDING):
        A, b, start, size, mu = _arrays(A, b, start, size, mu)
        vertex = _canonical_vertex(A, b, start, size, mu, sol, tol)
        if vertex is not None:
            return vertex
    return sol


#: Relative size (singular values of the mode equations' Jacobian ``E``; ``|J^T dlambda|`` in the
#: metric of ``A``) below which a direction counts as null.
INDETERMINATE_RTOL = 1e-10


def _canonical_vertex(A, b, start, size, mu, sol: NCPSolution, tol: float) -> NCPSolution | None:
    """The vertex of an indeterminate sliding answer, or None when the answer is unique.

    A patch of >= 4 coplanar contacts sliding with spin (a box flat on the ground, turning as it
    slides) has a one-parameter family of answers: the normal loads can shift along the null
    vector ``n`` of the mode equations' Jacobian ``E`` (+, -, +, - on the corners) while every law
    holds, and since the corners slip in different directions, the friction and so ``v+`` change
    along it (``|M^-1 J^T n| = 0.12`` for the cube-throw guess). Which answer Newton's least-squares
    steps reach depends on where they start (the last step's impulses), so the step would not be
    a function of the state, and no Jacobian of it could agree with finite differences of a
    rollout (the cube-throw trajectory Jacobian was off by 1.2e-3 relative from the step where its
    four corners loaded). The canonical answer is the family's end of least ``|lambda|``: shifted
    along ``n`` until a normal impulse reaches zero, that contact breaking (``lambda = 0``,
    ``c = 0``), the rest solved exactly by Newton in their modes. Its mode equations are regular,
    so the implicit Jacobian (that contact dropping out) is the derivative of this choice; the
    next step's warm start (the same modes) reaches it again. Families that leave ``v+`` unchanged
    (a box at rest: only the split of its load is free) are left alone, and so is a vertex that
    fails the law (then the answer is kept as it is)."""
    lam = np.ascontiguousarray(sol.lam, dtype=float)
    modes = np.asarray(sol.modes, dtype=np.int64)
    dirs = np.ascontiguousarray(sol.dirs if sol.dirs is not None else np.zeros((len(start), 2)), dtype=float)
    E, _, act = _linearization(A, b, start, size, mu, modes, dirs, lam)
    if E.shape[0] == 0:
        return None
    _, s, Vt = np.linalg.svd(E)
    if s[-1] > INDETERMINATE_RTOL * s[0]:
        return None
    n = np.zeros(len(b))
    n[act] = Vt[-1]
    normals = [int(start[g]) for g in range(len(start)) if modes[g] != NCPMode.BREAKING and abs(n[start[g]]) > 1e-8]
    if not normals:  # the freedom is in the friction only
        return None
    if n[normals[0]] > 0.0:  # the end where the first loaded contact's pair unloads, whatever the spin's sign
        n = -n
    tol_c = 1e-8 * (1.0 + np.abs(b).max())
    best = None
    for d in (n, -n):  # that end, else the other
        t, hit = np.inf, -1
        for g in range(len(start)):
            s0 = int(start[g])
            if modes[g] != NCPMode.BREAKING and d[s0] < -1e-8:
                tg = lam[s0] / -d[s0]
                if tg < t:
                    t, hit = tg, g
        if hit < 0 or not np.isfinite(t):
            continue
        trial = lam + t * d
        m2 = modes.copy()
        m2[hit] = NCPMode.BREAKING
        s0, k = int(start[hit]), int(size[hit])
        trial[s0:s0 + k] = 0.0
        ok = _newton(A, b, start, size, mu, m2, dirs, trial, 50, tol)[1]
        tol_l = 1e-9 * (1.0 + np.abs(trial).max())
        if _accept(A, b, start, size, mu, m2, dirs, trial, ok, tol_c, tol_l):
            best = (trial, m2)
            break
    if best is None:
        return None
    return _result(A, b, start, size, mu, best[0], best[1], dirs, "solved", sol.warm_start_hit, sol.iterations)


def _solve_ncp(A, b, start, size, mu, *, guess=None, tol: float = 1e-10, max_sweeps: int = 2000) -> NCPSolution:
    """:func:`solve_ncp` before the canonical choice of an indeterminate answer."""
    A, b, start, size, mu = _arrays(A, b, start, size, mu)
    m = len(b)
    if A.shape != (m, m):
        raise ValueError(f"solve_ncp: A has shape {A.shape}, expected ({m}, {m})")
    if not np.isfinite(A.sum() + b.sum()):
        raise ValueError("solve_ncp: A or b contains non-finite values")
    if m == 0:
        return NCPSolution(np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int64), "solved", 0.0, False, 0,
                           np.zeros((0, 2)))
    scale_b = 1.0 + np.abs(b).max()
    tol_c = 1e-8 * scale_b
    ng = len(start)
    dirs = np.zeros((ng, 2))
    if guess is not None:
        modes0, lam0 = guess[0], guess[1]
        lam = np.array(lam0, dtype=float, copy=True)
        modes = np.array(modes0, dtype=np.int64, copy=True)
        if len(guess) > 2 and guess[2] is not None and np.shape(guess[2]) == (ng, 2):
            dirs = np.array(guess[2], dtype=float, copy=True)
        elif np.any(modes == NCPMode.SATURATED):
            modes[modes == NCPMode.SATURATED] = NCPMode.STICKING
        if len(lam) == m and len(modes) == ng:
            its, ok = _newton(A, b, start, size, mu, modes, dirs, lam, 50, tol)
            tol_l = 1e-10 * (1.0 + np.abs(lam).max())
            if _accept(A, b, start, size, mu, modes, dirs, lam, ok, tol_c, tol_l):
                return _result(A, b, start, size, mu, lam, modes, dirs, "solved", True, its)
    # Cold: the friction-pyramid LCP (exact by pivoting; in planar groups it *is* the
    # Coulomb problem) gives modes and impulses; Newton makes them exact on the cone.
    lam, modes, its = _from_pyramid_lcp(A, b, start, size, mu)
    total = its
    for _ in range(10):  # active-set repairs: switch groups to the mode their violation points to
        trial = lam.copy()
        its, ok = _newton(A, b, start, size, mu, modes, dirs, trial, 50, tol)
        total += its
        tol_l = 1e-9 * (1.0 + np.abs(trial).max())
        if _accept(A, b, start, size, mu, modes, dirs, trial, ok, tol_c, tol_l):
            return _result(A, b, start, size, mu, trial, modes, dirs, "solved", False, total)
        if not np.all(np.isfinite(trial)):
            break
        new = _repair(A, b, start, size, mu, modes, dirs, trial, tol_c, tol_l)
        if np.array_equal(new, modes):
            break
        modes = new
        lam = np.where(np.isfinite(trial), trial, lam)
    # Then Gauss-Seidel on the cone from the LCP impulses, and Newton again.
    closest = None  # (residual, impulses, modes) of the Newton answer nearest a solution, for an inexact end
    for sweeps in (50, 500, max_sweeps):
        total += _pgs(A, b, start, size, mu, lam, sweeps, tol)
        tol_l = 1e-9 * (1.0 + np.abs(lam).max())
        modes = _modes(A, b, start, size, mu, lam, tol_c, tol_l)
        trial = lam.copy()
        its, ok = _newton(A, b, start, size, mu, modes, dirs, trial, 50, tol)
        total += its
        # the law's tolerance on the answer's own scale (the Gauss-Seidel iterate's can be far larger where A is
        # rank deficient: it drifts along the null space, and a negative normal impulse passed as "solved")
        if _accept(A, b, start, size, mu, modes, dirs, trial, ok, tol_c, 1e-9 * (1.0 + np.abs(trial).max())):
            return _result(A, b, start, size, mu, trial, modes, dirs, "solved", False, total)
        if np.all(np.isfinite(trial)):
            r = float(_residual(A, b, start, size, mu, trial))
            if closest is None or r < closest[0]:
                closest = (r, trial, modes.copy())
        sol = _repaired(A, b, start, size, mu, modes, dirs, trial, tol, tol_c, REPAIRS)
        if sol is not None:  # e.g. a slip that stops within the step: sliding -> saturated
            return _result(A, b, start, size, mu, sol[0], sol[1], sol[2], "solved", False, total + sol[3])
    modes = _modes(A, b, start, size, mu, lam, tol_c, 1e-9 * (1.0 + np.abs(lam).max()))
    if closest is not None and closest[0] < float(_residual(A, b, start, size, mu, lam)):
        # no answer obeys the law (e.g. a Painleve configuration of a rank-deficient problem, where Gauss-Seidel
        # drifts without bound): the Newton answer nearest one, still "inexact"
        return _result(A, b, start, size, mu, closest[1], closest[2], dirs, "inexact", False, total)
    return _result(A, b, start, size, mu, lam, modes, dirs, "inexact", False, total)


#: Active-set repairs tried after each Gauss-Seidel round. (Repairing a failed warm start the same way
#: was tried and dropped: at a ball's slip-stop it picks the saturated mode where the cold path finds
#: sticking, and test_sensitivity's landing Jacobian then disagrees with finite differences by 3%.)
REPAIRS = 4


def _repaired(A, b, start, size, mu, modes, dirs, lam, tol, tol_c, repairs):
    """``(lam, modes, dirs, iterations)`` of an accepted answer reached from ``(modes, lam)``, an answer of
    Newton that does not obey the law, by at most ``repairs`` active-set repairs (:func:`_repair`), each
    followed by Newton; None if none holds."""
    total = 0
    dirs = dirs.copy()
    for _ in range(repairs):
        if not np.all(np.isfinite(lam)):
            return None
        tol_l = 1e-9 * (1.0 + np.abs(lam).max())
        new = _repair(A, b, start, size, mu, modes, dirs, lam, tol_c, tol_l)
        if np.array_equal(new, modes):
            return None
        modes = new
        lam = lam.copy()
        its, ok = _newton(A, b, start, size, mu, modes, dirs, lam, 50, tol)
        total += its
        tol_l = 1e-9 * (1.0 + np.abs(lam).max())
        if _accept(A, b, start, size, mu, modes, dirs, lam, ok, tol_c, tol_l):
            return lam, modes, dirs, total
    return None


def _from_pyramid_lcp(A, b, start, size, mu):
    """Impulses and cone modes from the boxed-LCP (pyramid) version of the problem."""
    from .lcp import BoxedLCP, Mode, solve_lcp

    m = len(b)
    normal_of = np.full(m, -1, dtype=np.intp)
    mu_rows = np.zeros(m)
    for g in range(len(start)):
        s0, n = int(start[g]), int(size[g])
        for k in range(1, n):
            normal_of[s0 + k] = s0
            # the inscribed pyramid of a 3-D cone has half-width mu / sqrt(2)
            mu_rows[s0 + k] = mu[g] / np.sqrt(n - 1.0)
    sol = solve_lcp(BoxedLCP(A=A, b=b, normal_of=normal_of, mu=mu_rows))
    lam = np.where(np.isfinite(sol.lam), sol.lam, 0.0)
    modes = np.zeros(len(start), dtype=np.int64)
    c = A @ lam + b
    tol_c = 1e-8 * (1.0 + np.abs(b).max())
    for g in range(len(start)):
        s0, n = int(start[g]), int(size[g])
        if sol.modes[s0] == Mode.SEPARATING or lam[s0] <= 0.0:
            modes[g] = NCPMode.BREAKING
        elif n == 1:
            modes[g] = NCPMode.STICKING
        elif mu[g] == 0.0 or np.linalg.norm(c[s0 + 1: s0 + n]) > tol_c:
            modes[g] = NCPMode.SLIDING
        else:
            modes[g] = NCPMode.STICKING
    return lam, modes, int(sol.iterations)


def _result(A, b, start, size, mu, lam, modes, dirs, status, hit, its) -> NCPSolution:
    return NCPSolution(lam, A @ lam + b, np.asarray(modes, dtype=np.int64), status,
                       float(_residual(A, b, start, size, mu, lam)), hit, int(its), dirs)


class NCPAdapter:
    """The Coulomb-cone NCP as a contact adapter (:mod:`contact.adapter`)."""

    name = "ncp"

    def problem(self, A, b, layout, phi=None, previous: NCPProblem | None = None) -> NCPProblem:
        """The NCP on the rows of ``layout``: one group per contact (``mu = layout.mu``, one per contact), one
        per limit row (``mu = 0``); ``previous`` (same rows) lends its groups."""
        if previous is not None:
            return NCPProblem(A, b, previous.start, previous.size, previous.mu)
        nc, r, nlim = layout.nc, layout.r, layout.nlim
        start = np.concatenate((np.arange(nc) * r, nc * r + np.arange(nlim))).astype(np.int64)
        size = np.concatenate((np.full(nc, r), np.ones(nlim))).astype(np.int64)
        mu = np.concatenate((layout.mu, np.zeros(nlim)))
        return NCPProblem(A, b, start, size, mu)

    def solve(self, p: NCPProblem, guess: NCPSolution | None = None) -> NCPSolution:
        return solve_ncp(p.A, p.b, p.start, p.size, p.mu,
                         guess=None if guess is None else (guess.modes, guess.lam, guess.dirs))

    def residual(self, p: NCPProblem, lam) -> np.ndarray:
        """The natural-map residual (m,) row by row (module docstring); 0 exactly at a solution."""
        R = np.zeros(len(p.b))
        if len(R):
            A, b, start, size, mu = _arrays(p.A, p.b, p.start, p.size, p.mu)
            _natural_map(A, b, start, size, mu, np.ascontiguousarray(lam, dtype=float), R)
        return R

    def linearize(self, p: NCPProblem, sol: NCPSolution) -> Linearization:
        """The mode equations (:func:`_mode_equations`) at the solution, on the rows of the groups in
        contact (breaking groups keep ``dlambda = 0`` and drop out). Least squares: the equations of a
        flat patch are rank-deficient."""
        A, b, start, size, mu = _arrays(p.A, p.b, p.start, p.size, p.mu)
        dirs = sol.dirs if sol.dirs is not None else np.zeros((len(start), 2))
        E, Fc, act = _linearization(A, b, start, size, mu, np.asarray(sol.modes, dtype=np.int64), dirs,
                                    np.ascontiguousarray(sol.lam, dtype=float))
        return Linearization(E=E, Fc=Fc, unknowns=act)

    def contact_modes(self, sol: NCPSolution, layout) -> np.ndarray:
        """:class:`NCPMode` of each contact (nc,)."""
        return np.asarray(sol.modes[: layout.nc])

    def reclassify(self, p, sol, dl_dlam):
        """No complementarity-aware reclassification for the cone: None (the exact Jacobian)."""
        return None
