"""Boxed LCP of Nimble-style frictional contact (one simulator step), exact at its answer.

Problem
-------
Rows ``i = 0..n-1`` are contact-constraint rows. With ``A`` (n, n) the symmetric positive
*semi*-definite Delassus matrix ``J M^-1 J^T`` (often rank deficient) and ``b`` (n,)::

    w = A x + b

* normal / unilateral row (``normal_of[i] == -1``): ``lo_i = 0``, ``hi_i = +inf``;
* friction row tied to normal row ``k = normal_of[i]``: ``lo_i = -mu_i x_k``, ``hi_i = +mu_i x_k``.

Complementarity (the boxed / mixed LCP "with friction index" of ODE's Dantzig solver), per row::

    lo_i <= x_i <= hi_i;   x_i == lo_i => w_i >= 0;   x_i == hi_i => w_i <= 0;
    lo_i < x_i < hi_i => w_i == 0.

Equivalently ``x_i > lo_i => w_i <= 0`` and ``x_i < hi_i => w_i >= 0``. ``x`` are impulses and
``w`` the contact-frame velocities after the step; a row sliding towards ``+t`` has
``x_t = -mu x_n`` (at its lower bound, ``w_t > 0``).

Active sets (:class:`Mode`, one per row) describe an answer combinatorially:

* ``CLAMPING``   normal row pushing (``w = 0``), or friction row sticking (``w = 0``, inside box);
* ``SEPARATING`` normal row with ``x = 0``; friction row with ``x = 0`` because its normal is
  separating (or because ``mu = 0``);
* ``TIED``       normal row with ``x ~ 0`` and ``w ~ 0`` (both readings valid); it is *solved as
  clamping* by :func:`solve_active_set`;
* ``BOUNDED``    friction row at a bound, ``x = sign * mu * x_normal`` (``sign = +1`` upper,
  ``-1`` lower), sliding.

Method and why
--------------
Warm path: the previous step's active set is re-solved exactly (:func:`solve_active_set`, one
small dense solve) and accepted iff it passes the acceptance test below. This is the common
case inside a simulation and costs a few tens of microseconds.

Cold path: **Lemke's complementary pivoting on the Stewart-Trinkle reformulation**, with a
lexicographic ratio test. Each friction row ``j`` with ``mu_j > 0`` (normal ``k``) is written
with two one-sided directions and a slack: ``x_j = b+_j - b-_j`` and::

    0 <= b+_j  _|_  w_j + l_j >= 0
    0 <= b-_j  _|_ -w_j + l_j >= 0
    0 <= l_j   _|_  mu_j x_k - b+_j - b-_j >= 0

which is exactly the box ``|x_j| <= mu_j x_k`` with the boxed complementarity above (``l_j`` is
the sliding speed ``|w_j|``). Friction rows with ``mu = 0`` are dropped (``x = 0``). The
standard LCP matrix is ``M = [[G^T A G, E], [U - E^T, 0]]`` (``G`` maps ``(x_N, b+, b-)`` to
``x``, ``E = [0; I; I]``, ``U_jk = mu_j``).

Why Lemke here (rather than Dantzig or PGS):

* It is a *finite, direct* method: the answer is a basic solution of a linear system, so it
  is exact up to rounding, never a "converged enough" iterate. (PGS would need an active-set
  guess + check loop and stalls on the rank-deficient, degenerate problems that are the norm
  here: coplanar box corners, duplicate contacts. Dantzig's boxed pivoting needs nonsingular
  principal blocks of ``A`` and so needs CFM regularisation on PSD ``A``, i.e. the wrong
  answer.)
* It is *guaranteed to terminate with a solution* for this class. ``M`` is copositive:
  ``z^T M z = (G u)^T A (G u) + l^T U x_N >= 0`` for ``z = (u, l) >= 0``. On a secondary ray
  ``(z + t d, z0 > 0)`` one gets ``d^T M d = 0`` hence ``A G d_u = 0``, and
  ``d^T q = -d^T M z - z0 e^T d <= -z0 e^T d_u``. If ``b`` lies in ``range(A)`` plus a
  nonnegative offset on normal rows (true for physical data ``b = J v + c``, ``c_N >= 0``;
  always true when ``A`` has full rank) then ``d^T q = c_N^T d_N >= 0``, so ``d_u = 0``; a
  ray that only grows slacks ``l`` needs ``mu x_k + z0 = 0``, impossible for ``z0 > 0``. So
  no secondary ray exists, and the lexicographic rule rules out cycling in degenerate
  problems (Stewart & Trinkle 1996; Anitescu & Potra 1997 give this result for their
  formulations).
* Cost is fine for simulator sizes (0.1-0.5 ms for n <= 24, see below), and only paid
  when the warm start misses.

After pivoting, the answer is **always re-solved** on its active set (minimal-norm least
squares on the reduced system, the "stabilisation" of Nimble): rows with ``x ~ 0, w ~ 0`` are
included as clamping so a rank-deficient problem (4 coplanar corners, duplicated contacts)
returns the least-squares-minimal impulse (e.g. equal corner impulses) instead of whatever
vertex the pivoting stopped at. Every candidate passes the acceptance test below or is
rejected; the candidates are, in order: the maximal clamping set read off the pivoting answer
(plus up to 3 rounds of switching the rows its minimal-norm solution violates, since with
friction the minimal-norm point of a rank-deficient set can leave a friction box), the exact
Lemke basis, ``TIED`` rows as separating, and finally the Lemke point refined on its basis
(the only candidate whose reported active set does not reproduce it). Should pivoting fail
numerically, Lemke is rerun with a growing diagonal regularisation ``M + delta I`` whose
active set is then re-solved *unregularised* and checked. If nothing reaches tolerance (e.g.
an infeasible problem, ``b`` outside the physical range), the best finite iterate is returned
with ``status == "inexact"``; no exception, never NaN.

Acceptance
----------
An answer is accepted (``status == "solved"``) iff, row by row, with ``tx = tol |x|_inf`` and
``tw = tol |b|_inf + 1e-12 |A|_inf |x|_inf`` (the last term is a rounding allowance)::

    lo - tx <= x <= hi + tx,   x > lo + tx  =>  w <= tw,   x < hi - tx  =>  w >= -tw.

Impulses are measured against impulses and velocities against velocities, so a huge ``x``
(e.g. from an infeasible problem) cannot hide a velocity violation. It implies
``lcp_residual(lcp, x) <= tx + tw``. Accepted answers of the tests have residuals at rounding
level (~1e-16 relative).

Timings
-------
``timeit`` (best of 7) on this machine (Python 3.11, numpy 2.4, scipy 1.17), physical scenes;
"warm" is ``solve_lcp(lcp, guess=previous)`` hitting, "cold" is ``solve_lcp(lcp)``:

=================================================  ========  ========  ============
scene                                              warm      cold      Lemke pivots
=================================================  ========  ========  ============
n = 4:  planar box sliding on 2 corners            ~29 us    ~0.16 ms  7
n = 12: cube resting on 4 corners (rank 6)         ~31 us    ~0.18 ms  4
n = 12: cube sliding and spinning on 4 corners     ~38 us    ~0.42 ms  21
n = 24: two stacked cubes, 8 corner contacts       ~40 us    ~0.48 ms  18
=================================================  ========  ========  ============

Building the :class:`BoxedLCP` (validation) adds ~15 us.

Compiled core
-------------
When the compiled core is present (:mod:`contact.core`), :func:`solve_lcp` and :class:`LCPAdapter`
(``solve``, ``linearize``, ``reclassify``) run its C++ twin (``cpp/src/lcp.hpp``): the same
operations in the same order, with Eigen in place of LAPACK (LU with partial pivoting and a port
of ``dgecon``'s condition estimate, so the LU / minimal-norm decision uses the same estimate and
threshold; Eigen's column-pivoted Householder QR for ``dgeqp3``). Lemke's tableau updates are
elementwise, hence bit for bit the same; the dense solves and products round differently, so
impulses agree to ``1e-12`` relative on well-conditioned reduced systems and to a few ``kappa eps``
on ill-conditioned ones (``tests/test_core_lcp.py``). A whole step's solve drops from ~40-100 us to
~3-7 us on the registered problems. The Python code here stays the reference
(:func:`solve_lcp_reference`, ``LCPAdapter.linearize_reference`` / ``reclassify_reference``). The warm path is one LAPACK
``dgetrf``/``dgecon``/``dgetrs`` on the reduced matrix when it is well conditioned, a
column-pivoted QR (``dgeqp3``) minimal-norm solve when it is not, plus the acceptance test.
"""

from __future__ import annotations

import copy
import enum
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from numba import njit
from scipy.linalg import lapack as _lapack

from . import core
from .adapter import Linearization

__all__ = [
    "BoxedLCP",
    "LCPSolution",
    "LCPAdapter",
    "Mode",
    "classify",
    "natural_map",
    "lcp_residual",
    "solve_active_set",
    "solve_lcp",
    "solve_lcp_reference",
]

# The compiled twin of this module (cpp/src/lcp.cpp), decided once: solve_lcp and LCPAdapter use it
# when present; the Python below stays the reference (solve_lcp_reference, LCPAdapter.linearize_reference).
_core = core.module if core.available() else None

# Reduced systems whose 1-norm reciprocal condition estimate (LAPACK dgecon) exceeds this are
# solved by LU; the others get the minimal-norm solution.
_RCOND_LU = 1e-8
# Relative rank cutoff of the minimal-norm solve (on |R_ii| of a column-pivoted QR): the null
# directions of a Delassus matrix come out at ~1e-16 relative, physical ill-conditioning stays
# far above, and a dropped direction costs at most this (relative) in the residual.
_RANK_RTOL = 1e-10
# Below this (relative) a direction is rounding noise and always dropped.
_NOISE_RTOL = 1e3 * np.finfo(float).eps
# Rounding allowance of the velocity test, relative to |A|_inf |x|_inf (n eps with headroom).
_ROUNDING = 1e-12
# Relative tolerance used to read an active set off an answer (x ~ 0, w ~ 0) and to report
# TIED rows.
_CLASSIFY_TOL = 1e-8
# Lemke: a pivot entry must exceed _PIV_RTOL * max(1, |column|_inf); ratios closer than
# _TIE_RTOL (relative) are ties, broken lexicographically; a run stops as soon as z0 is below
# _Z0_RTOL * max(1, |rhs|_inf) (the complementary point then solves the LCP).
_PIV_RTOL = 1e-11
_TIE_RTOL = 1e-11
_Z0_RTOL = 1e-13
# Active-set correction rounds on the maximal clamping set before falling back to the
# pivoting basis.
_REPAIR_ROUNDS = 3
# Diagonal regularisations of the (scaled) Stewart-Trinkle matrix tried when plain pivoting
# yields nothing acceptable; their active sets are re-solved without regularisation.
_REGULARISATION = (1e-10, 1e-7, 1e-4)

_dgetrf = _lapack.dgetrf
_dgecon = _lapack.dgecon
_dgetrs = _lapack.dgetrs
_dlange = _lapack.dlange
_dgeqp3 = _lapack.dgeqp3
_dorgqr = _lapack.dorgqr
_dtrtrs = _lapack.dtrtrs


class Mode(enum.IntEnum):
    """Role of one row in an active set (see the module docstring)."""

    SEPARATING = 0
    CLAMPING = 1
    TIED = 2
    BOUNDED = 3


_SEP = int(Mode.SEPARATING)
_CLAMP = int(Mode.CLAMPING)
_TIED = int(Mode.TIED)
_BOUND = int(Mode.BOUNDED)


@dataclass(eq=False)
class BoxedLCP:
    """One boxed LCP ``w = A x + b`` with friction-indexed bounds (n rows).

    Attributes
    ----------
    A : (n, n) float array
        Symmetric positive semi-definite Delassus matrix ``J M^-1 J^T`` (symmetry and
        semi-definiteness are assumed, not checked).
    b : (n,) float array
        Contact-frame velocity without contact impulses (plus any stabilisation offsets).
    normal_of : (n,) int array
        ``-1`` for a normal / unilateral row; for a friction row, the index of its normal row
        (which must itself have ``normal_of == -1``).
    mu : (n,) float array
        Friction coefficient (``>= 0``) of each friction row; must be 0 on unilateral rows.

    The arrays are stored as contiguous float64 / intp (converted if needed). ``ValueError``
    is raised on wrong shapes, non-finite values, negative ``mu``, ``mu != 0`` on a unilateral
    row, or a ``normal_of`` entry that is out of range or points at a friction row.
    """

    A: np.ndarray
    b: np.ndarray
    normal_of: np.ndarray
    mu: np.ndarray
    _fric: np.ndarray = field(init=False, repr=False)
    _k: np.ndarray = field(init=False, repr=False)
    _carry: np.ndarray = field(init=False, repr=False)
    _hi_pad: np.ndarray = field(init=False, repr=False)
    _anorm: float = field(init=False, repr=False)
    _bnorm: float = field(init=False, repr=False)

    def __post_init__(self) -> None:
        A = np.ascontiguousarray(self.A, dtype=float)
        if A.ndim != 2 or A.shape[0] != A.shape[1]:
            raise ValueError(f"BoxedLCP: A must be a square (n, n) matrix, got shape {A.shape}")
        n = A.shape[0]
        b = np.ascontiguousarray(self.b, dtype=float)
        if b.shape != (n,):
            raise ValueError(f"BoxedLCP: b must have shape ({n},) to match A, got {b.shape}")
        mu = np.ascontiguousarray(self.mu, dtype=float)
        if mu.shape != (n,):
            raise ValueError(f"BoxedLCP: mu must have shape ({n},), got {mu.shape}")
        nof = np.asarray(self.normal_of)
        if nof.shape != (n,):
            raise ValueError(f"BoxedLCP: normal_of must have shape ({n},), got {nof.shape}")
        if nof.dtype != np.intp:
            if n and not np.issubdtype(nof.dtype, np.integer):
                f = np.asarray(nof, dtype=float)
                if not np.array_equal(f, np.round(f)):
                    raise ValueError("BoxedLCP: normal_of must hold integer row indices (or -1)")
            nof = nof.astype(np.intp)
        if not np.isfinite(A.sum() + b.sum() + mu.sum()):  # cheap; details only on failure
            for name, arr in (("A", A), ("b", b), ("mu", mu)):
                if not np.isfinite(arr).all():
                    raise ValueError(f"BoxedLCP: {name} contains non-finite values (nan or inf)")
        self.A, self.b, self.normal_of, self.mu = A, b, nof, mu
        if n == 0:
            self._fric = np.zeros(0, dtype=bool)
            self._k = np.zeros(0, dtype=np.intp)
            self._carry = np.zeros(0, dtype=bool)
            self._hi_pad = np.zeros(0)
            self._anorm = self._bnorm = 0.0
            return
        if nof.min() < -1 or nof.max() >= n:
            bad = np.flatnonzero((nof < -1) | (nof >= n)).tolist()
            raise ValueError(f"BoxedLCP: normal_of must be -1 or a row index in [0, {n}); bad rows {bad}")
        fric = nof >= 0
        k = np.where(fric, nof, np.arange(n))
        if fric.take(k).any():
            bad = np.flatnonzero(fric & fric[k]).tolist()
            raise ValueError(
                f"BoxedLCP: friction rows must point at a normal row (normal_of == -1); bad rows {bad}"
            )
        if mu.min() < 0:
            raise ValueError(f"BoxedLCP: mu must be >= 0; bad rows {np.flatnonzero(mu < 0).tolist()}")
        carry = mu > 0
        if (carry > fric).any():
            bad = np.flatnonzero(carry & ~fric).tolist()
            raise ValueError(f"BoxedLCP: mu must be 0 on unilateral rows (normal_of == -1); bad rows {bad}")
        carry |= ~fric
        self._fric = fric
        self._k = k
        self._carry = carry
        self._hi_pad = np.where(fric, 0.0, np.inf)
        self._anorm = float(_dlange("I", A))
        self._bnorm = float(np.abs(b).max())

    @property
    def n(self) -> int:
        """Number of rows."""
        return self.b.shape[0]

    def with_values(self, A: np.ndarray, b: np.ndarray) -> "BoxedLCP":
        """The same rows (``normal_of``, ``mu`` and all that derives from them) with new ``A``, ``b``.

        Only the new arrays are checked (shapes, finite values): this is the
        per-step path of a simulation whose contact structure did not change.
        """
        A = np.ascontiguousarray(A, dtype=float)
        b = np.ascontiguousarray(b, dtype=float)
        n = self.b.shape[0]
        if A.shape != (n, n) or b.shape != (n,):
            raise ValueError(f"BoxedLCP.with_values: A {A.shape} and b {b.shape} do not match {n} rows")
        if not np.isfinite(A.sum() + b.sum()):
            raise ValueError("BoxedLCP.with_values: A or b contains non-finite values (nan or inf)")
        new = copy.copy(self)
        new.A, new.b = A, b
        new._anorm = float(_dlange("I", A)) if n else 0.0
        new._bnorm = float(np.abs(b).max()) if n else 0.0
        return new

    def lower(self, x: np.ndarray) -> np.ndarray:
        """Lower bounds (n,) at impulses ``x`` (n,): 0 on normal rows, ``-mu_i x_k`` on friction rows."""
        x = np.asarray(x, dtype=float)
        return np.where(self._fric, -self.mu * x[self._k], 0.0)

    def upper(self, x: np.ndarray) -> np.ndarray:
        """Upper bounds (n,) at impulses ``x`` (n,): +inf on normal rows, ``mu_i x_k`` on friction rows."""
        x = np.asarray(x, dtype=float)
        return np.where(self._fric, self.mu * x[self._k], np.inf)


@dataclass(eq=False)
class LCPSolution:
    """Answer of :func:`solve_lcp` (n rows).

    Attributes
    ----------
    lam : (n,) float array, impulses (the module docstring's ``x``; ``x`` stays as a read-only alias).
    w : (n,) float array, velocities ``A x + b``.
    modes : (n,) int64 array of :class:`Mode` values: the active set ``x`` was solved on, in
        normal form (clamped normal rows with ``x ~ 0`` are reported ``TIED``; friction rows
        that cannot carry load, because their normal is not clamping or ``mu == 0``, are
        ``SEPARATING``). ``solve_active_set(lcp, modes, signs)`` reproduces ``x``, so the pair
        is the warm start ``guess`` for the next step. (Exception: the last-resort answer of a
        numerically difficult solve, the refined pivoting point, carries its pivoting basis.)
    signs : (n,) int64 array: +1 friction row at its upper bound, -1 at its lower bound, else 0.
    status : ``"solved"`` (passed the acceptance test of :func:`solve_lcp`) or ``"inexact"``
        (best finite iterate: smallest natural-map residual).
    residual : natural-map residual of ``x`` (absolute, see :func:`lcp_residual`).
    warm_start_hit : True iff the ``guess`` active set was accepted.
    iterations : number of Lemke pivots (0 on a warm-start hit or a trivial problem).
    """

    lam: np.ndarray
    w: np.ndarray
    modes: np.ndarray
    signs: np.ndarray
    status: str
    residual: float
    warm_start_hit: bool
    iterations: int

    @property
    def x(self) -> np.ndarray:
        """Alias of :attr:`lam` (the impulses (n,), ``x`` in the LCP notation ``w = A x + b``); read-only."""
        return self.lam


# ----------------------------------------------------------------------------------------
# residual, classification
# ----------------------------------------------------------------------------------------


def _evaluate(lcp: BoxedLCP, x: np.ndarray, tol: float | None = None):
    """``(w, residual, |x|_inf, accepted)`` of impulses ``x`` (n >= 1).

    ``accepted`` (only computed when ``tol`` is given and the natural-map residual is small)
    is the row-wise test of the module docstring: every impulse within ``tx = tol |x|_inf`` of
    its box, and ``x > lo + tx => w <= tw``, ``x < hi - tx => w >= -tw`` with
    ``tw = tol |b|_inf + _ROUNDING |A|_inf |x|_inf``.
    """
    w = lcp.A @ x
    w += lcp.b
    a = lcp.mu * x.take(lcp._k)  # box half-width (0 on normal rows, whose mu is 0)
    np.abs(a, out=a)
    hi = a + lcp._hi_pad  # +inf on normal rows
    z = x - w
    np.maximum(z, -a, out=z)
    np.minimum(z, hi, out=z)
    z -= x
    res = float(np.abs(z).max())
    xs = float(np.abs(x).max())
    if not (res < np.inf and xs < np.inf):  # nan or inf anywhere
        return w, np.inf, np.inf, False
    if tol is None:
        return w, res, xs, False
    tx = tol * xs
    tw = tol * lcp._bnorm + _ROUNDING * lcp._anorm * xs
    # |r_i| <= min(tx, tw) implies the row-wise test, which implies |r_i| <= tx + tw
    if res <= min(tx, tw):
        return w, res, xs, True
    if res > tx + tw:
        return w, res, xs, False
    a += x  # distance above the lower bound
    hi -= x  # distance below the upper bound
    ok = (a >= -tx) & (hi >= -tx) & ((a <= tx) | (w <= tw)) & ((hi <= tx) | (w >= -tw))
    return w, res, xs, bool(ok.all())


def lcp_residual(lcp: BoxedLCP, x: np.ndarray) -> float:
    """Natural-map residual ``max_i |x_i - mid(lo_i, hi_i, x_i - w_i)|`` of impulses ``x`` (n,).

    ``lo, hi`` are the bounds at ``x`` and ``mid`` is the median of three (an inverted box,
    from a negative normal impulse, still gives a positive residual). It is 0 exactly at a
    solution and > 0 otherwise; ``inf`` for non-finite ``x``; 0.0 when ``n == 0``.
    """
    x = np.asarray(x, dtype=float)
    if x.shape != (lcp.n,):
        raise ValueError(f"lcp_residual: x must have shape ({lcp.n},), got {x.shape}")
    if lcp.n == 0:
        return 0.0
    if not np.isfinite(x).all():
        return np.inf
    return _evaluate(lcp, x)[1]


def natural_map(lcp: BoxedLCP, x: np.ndarray) -> np.ndarray:
    """The optimality residual row by row (n,): ``x_i - mid(lo_i, hi_i, x_i - w_i)``, ``w = A x + b``
    (its largest magnitude is :func:`lcp_residual`). Zero exactly at a solution; on an active set it
    is the mode equations (``x`` on separating rows, ``w`` on clamping ones, ``x - bound`` on bounded
    ones) whose derivative :meth:`LCPAdapter.linearize` takes."""
    x = np.asarray(x, dtype=float)
    w = lcp.A @ x + lcp.b
    return x - np.clip(x - w, lcp.lower(x), lcp.upper(x))


def classify(
    lcp: BoxedLCP, x: np.ndarray, w: np.ndarray, *, tol: float = 1e-9
) -> tuple[np.ndarray, np.ndarray]:
    """Active set ``(modes, signs)`` (each (n,) int64) of impulses ``x`` and velocities ``w`` (n,).

    ``tol`` is relative: impulses are compared with ``tol * |x|_inf``, velocities with
    ``tol * max(|b|_inf, |A|_inf |x|_inf)``.

    Normal rows: ``x > 0`` -> CLAMPING; ``x ~ 0, w > 0`` -> SEPARATING; ``x ~ 0, w ~ 0`` -> TIED
    (clamping and separating both valid); ``x ~ 0, w < 0`` (not a solution) -> CLAMPING.
    Friction rows: SEPARATING if the normal is SEPARATING or ``mu == 0``; BOUNDED with sign +1
    at the upper bound with ``w < 0``, sign -1 at the lower bound with ``w > 0``; CLAMPING
    otherwise (sticking, including ``w ~ 0`` exactly at a bound, which keeps the most freedom
    for the minimal-norm re-solve).
    """
    x = np.asarray(x, dtype=float)
    w = np.asarray(w, dtype=float)
    n = lcp.n
    if x.shape != (n,) or w.shape != (n,):
        raise ValueError(f"classify: x and w must have shape ({n},), got {x.shape} and {w.shape}")
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    xs = float(np.abs(x).max())
    tx = tol * xs
    tw = tol * max(lcp._bnorm, lcp._anorm * xs)
    wpos = w > tw
    wneg = w < -tw
    nm = np.where((x > tx) | wneg, _CLAMP, np.where(wpos, _SEP, _TIED))
    fric = lcp._fric
    a = lcp.mu * x[lcp._k]
    active = fric & (nm[lcp._k] != _SEP) & lcp._carry
    up = active & wneg & (x >= a - tx)
    dn = active & wpos & (x <= -a + tx) & ~up
    fm = np.where(up | dn, _BOUND, np.where(active, _CLAMP, _SEP))
    modes = np.where(fric, fm, nm).astype(np.int64)
    signs = up.astype(np.int64) - dn.astype(np.int64)
    return modes, signs


# ----------------------------------------------------------------------------------------
# exact solve on an active set
# ----------------------------------------------------------------------------------------


def _qr_solve(qr, jpvt, tau, r, k):
    """``Q_1 R_11^-T (Pi^T r)_{1..k}`` from a dgeqp3 factorisation of ``K^T`` (None on failure)."""
    u, info = _dtrtrs(qr[:k, :k], r.take(jpvt[:k] - 1), lower=0, trans=1)
    if info != 0:
        return None
    q, _, info = _dorgqr(qr[:, :k], tau[:k])
    if info != 0:
        return None
    y = q @ u
    return y if np.isfinite(y).all() else None


def _min_norm(K: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Minimal-norm solution of ``K y = r`` (rank-deficient, consistent), column-pivoted QR.

    With ``K^T Pi = Q R`` and numerical rank ``k`` (``|R_ii| > _RANK_RTOL |R_00|``), the answer is
    ``y = Q_1 u`` with ``R_11^T u = (Pi^T r)_{1..k}``: it lies in ``range(K^T)`` and satisfies
    the equations, hence equals ``pinv(K) r`` for consistent systems (and ~2x cheaper than
    ``lstsq``). Inconsistent systems get the solution of ``k`` independent equations (the
    caller's residual check rejects such an active set anyway).
    """
    qr, jpvt, tau, _, info = _dgeqp3(K.T)
    if info == 0:
        d = np.abs(qr.diagonal())
        if not d[0] > 0:
            return np.zeros_like(r)
        k = int(np.count_nonzero(d > _RANK_RTOL * d[0]))
        y = _qr_solve(qr, jpvt, tau, r, k)
        k2 = int(np.count_nonzero(d > _NOISE_RTOL * d[0]))
        if y is not None and k2 > k:
            # Directions between noise level and the cutoff were dropped. That is right only
            # if the data does not use them (consistent system); otherwise keep them.
            e = np.abs(K @ y - r).max()
            if not e <= _ROUNDING * (np.abs(r).max() + d[0] * np.abs(y).max()):
                y2 = _qr_solve(qr, jpvt, tau, r, k2)
                if y2 is not None and np.abs(K @ y2 - r).max() < e:
                    y = y2
        if y is not None:
            return y
    try:  # pragma: no cover - LAPACK failure on finite data
        y = np.linalg.lstsq(K, r, rcond=_RANK_RTOL)[0]
    except np.linalg.LinAlgError:  # pragma: no cover
        return np.zeros_like(r)
    return y if np.isfinite(y).all() else np.zeros_like(r)  # pragma: no cover


def _solve_small(K: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Solve ``K y = r``: LU when well conditioned (dgecon), else the minimal-norm solution."""
    lu, piv, info = _dgetrf(K)
    if info == 0:
        rc, info = _dgecon(lu, _dlange("1", K), norm="1")
        if info == 0 and rc > _RCOND_LU:
            y, info = _dgetrs(lu, piv, r)
            if info == 0 and np.isfinite(y).all():
                return y
    return _min_norm(K, r)


def _masks(lcp: BoxedLCP, modes: np.ndarray, signs: np.ndarray):
    """Clamping-row and bounded-row masks of an active set, in normal form."""
    return _masks_kernel(lcp._k, lcp._carry, modes, signs)


@njit(cache=True)
def _masks_kernel(k, carry, modes, signs):
    n = modes.shape[0]
    cl = np.empty(n, dtype=np.bool_)
    for i in range(n):
        cl[i] = modes[i] == _CLAMP or modes[i] == _TIED
    act = np.empty(n, dtype=np.bool_)
    bm = np.empty(n, dtype=np.bool_)
    for i in range(n):
        a = cl[k[i]] and carry[i]
        bm[i] = a and modes[i] == _BOUND and signs[i] != 0
        act[i] = a and cl[i]
    return act, bm


def _reduced(lcp: BoxedLCP, cm, bm, signs):
    """The reduced system of an active set (masks ``cm``, ``bm``): ``(C, P, K)``.

    Clamping rows ``C`` keep ``w_C = 0``; bounded rows follow their normal, ``x_B = E x_C``,
    i.e. ``x = P x_C`` (``P`` (n, nC); None when no row is bounded: ``x[C] = x_C``), so
    ``w_C = K x_C + b_C`` with ``K = A_C P = A_CC + A_CB E``. The one definition behind the
    active-set solve (:func:`_solve_masks`) and the implicit Jacobian (:meth:`LCPAdapter.linearize`).
    """
    C, P, K, bounded = _reduced_kernel(lcp.A, lcp._k, lcp.mu, cm, bm, signs)
    return C, (P if bounded else None), K


@njit(cache=True)
def _reduced_kernel(A, k, mu, cm, bm, signs):
    n = A.shape[0]
    C = np.flatnonzero(cm)
    nc = C.shape[0]
    AC = np.empty((nc, n))
    for a in range(nc):
        AC[a] = A[C[a]]
    P = np.zeros((n, nc))
    bounded = False
    for i in range(n):
        if bm[i]:
            bounded = True
    if not bounded:
        K = np.empty((nc, nc))
        for a in range(nc):
            for c in range(nc):
                K[a, c] = AC[a, C[c]]
        return C, P, K, False
    pos = np.empty(n, dtype=np.int64)
    for a in range(nc):
        pos[C[a]] = a
        P[C[a], a] = 1.0
    for i in range(n):
        if bm[i]:
            P[i, pos[k[i]]] = np.sign(signs[i]) * mu[i]
    return C, P, AC @ P, True


def _solve_masks(lcp, cm, bm, signs, x0=None) -> np.ndarray:
    """Impulses on the active set given by masks (``x0``: refine that point instead)."""
    x = np.zeros(lcp.n)
    if not cm.any():
        return x
    C, P, K = _reduced(lcp, cm, bm, signs)
    r = -lcp.b.take(C)
    if x0 is None:
        xc = _solve_small(K, r)
    else:
        x0c = x0.take(C)
        xc = x0c + _solve_small(K, r - K @ x0c)
    if P is None:
        x[C] = xc
        return x
    return P @ xc


def solve_active_set(lcp: BoxedLCP, modes: np.ndarray, signs: np.ndarray) -> np.ndarray:
    """Exact impulses (n,) on a given active set ``(modes, signs)``, each (n,) int.

    Clamping rows ``C`` (``CLAMPING`` or ``TIED``) keep ``w_C = 0``; ``BOUNDED`` friction rows
    follow their normal, ``x_B = E x_C`` (``E`` holds ``sign * mu`` in the normal's column);
    all other rows get ``x = 0``, including friction rows whose normal is not clamping, rows
    with ``mu == 0`` and BOUNDED rows with sign 0. The reduced system
    ``(A_CC + A_CB E) x_C = -b_C`` is solved by LU when well conditioned and otherwise as the
    least-squares minimal-norm solution (Nimble's stabilisation: a rank-deficient contact set
    shares the load with the smallest impulse). The inequalities are not checked (see
    :func:`lcp_residual`).
    """
    modes = np.asarray(modes)
    signs = np.asarray(signs)
    if modes.shape != (lcp.n,) or signs.shape != (lcp.n,):
        raise ValueError(
            f"solve_active_set: modes and signs must have shape ({lcp.n},), got "
            f"{modes.shape} and {signs.shape}"
        )
    cm, bm = _masks(lcp, modes, signs)
    return _solve_masks(lcp, cm, bm, signs)


def _report(lcp, cm, bm, signs, x, xs):
    """``(modes, signs)`` in normal form for the masks ``x`` was solved on."""
    tied = cm & ~lcp._fric
    tied &= x <= _CLASSIFY_TOL * xs
    modes = cm.astype(np.int64)
    modes += tied
    modes[bm] = _BOUND
    sg = np.zeros(lcp.n, dtype=np.int64)
    sg[bm] = np.sign(signs[bm])
    return modes, sg


# ----------------------------------------------------------------------------------------
# Lemke on the Stewart-Trinkle reformulation
# ----------------------------------------------------------------------------------------


class _ST:
    """Stewart-Trinkle standard LCP ``(M, q)`` of the scaled boxed LCP, and the maps back.

    Scaling: ``A' = A / s_A`` (unit largest diagonal), ``b' = b / |b|_inf``; the boxed LCP is
    positively homogeneous, so ``x = x' |b|_inf / s_A``.
    """

    def __init__(self, lcp: BoxedLCP):
        A, b, n = lcp.A, lcp.b, lcp.n
        nidx = np.flatnonzero(~lcp._fric)
        fidx = np.flatnonzero(lcp._fric & (lcp.mu > 0))
        c, f = nidx.size, fidx.size
        posn = np.full(n, -1, dtype=np.intp)
        posn[nidx] = np.arange(c)
        kk = posn[lcp.normal_of[fidx]]
        sa = float(np.abs(np.diag(A)).max())
        if not sa > 0:
            sa = float(np.abs(A).max()) or 1.0
        sb = lcp._bnorm or 1.0
        S = np.concatenate([nidx, fidx, fidx])
        sg = np.concatenate([np.ones(c + f), -np.ones(f)])
        N = c + 3 * f
        u = c + 2 * f
        M = np.zeros((N, N))
        M[:u, :u] = A[np.ix_(S, S)] * np.outer(sg, sg) * (1.0 / sa)
        eye = np.eye(f)
        M[c : c + f, u:] = eye
        M[c + f : u, u:] = eye
        M[u + np.arange(f), kk] = lcp.mu[fidx]
        M[u:, c : c + f] = -eye
        M[u:, c + f : u] = -eye
        q = np.zeros(N)
        q[:u] = sg * b[S] * (1.0 / sb)
        self.M, self.q, self.N = M, q, N
        self.c, self.f, self.nidx, self.fidx, self.kk = c, f, nidx, fidx, kk
        self.unscale = sb / sa

    def to_x(self, lcp: BoxedLCP, z: np.ndarray) -> np.ndarray:
        """Impulses (n,) of a Stewart-Trinkle point ``z`` (N,)."""
        c, f = self.c, self.f
        x = np.zeros(lcp.n)
        x[self.nidx] = z[:c]
        x[self.fidx] = z[c : c + f] - z[c + f : c + 2 * f]
        return x * self.unscale

    def basis_modes(self, lcp: BoxedLCP, zbasic: np.ndarray):
        """Active set read off the final Lemke basis (``zbasic``: which z variables are basic).

        Normal row: basic ``x`` -> clamping. Friction row of a clamping normal: basic ``b+``
        (``b-``) with basic slack ``l`` -> bounded +1 (-1); some basic ``b+/b-`` otherwise ->
        clamping (``w = 0``); no basic ``b+/b-`` -> ``x`` pinned to 0 -> separating.
        """
        c, f = self.c, self.f
        modes = np.full(lcp.n, _SEP, dtype=np.int64)
        signs = np.zeros(lcp.n, dtype=np.int64)
        ncl = zbasic[:c]
        modes[self.nidx] = np.where(ncl, _CLAMP, _SEP)
        if f:
            bp, bm, lam = zbasic[c : c + f], zbasic[c + f : c + 2 * f], zbasic[c + 2 * f :]
            act = ncl[self.kk] & (bp | bm)
            up = act & lam & bp & ~bm
            dn = act & lam & bm & ~bp
            modes[self.fidx] = np.where(up | dn, _BOUND, np.where(act, _CLAMP, _SEP))
            signs[self.fidx] = up.astype(np.int64) - dn.astype(np.int64)
        return modes, signs


class LemkeResult(NamedTuple):
    """The end of one Lemke run (:func:`_lemke`; ``contactraj_core.lcp_lemke`` returns the same four, in order)."""

    z: np.ndarray  #: (N,) the z-part of the final basic point
    zbasic: np.ndarray  #: (N,) bool, which z variables are basic
    pivots: int
    ok: bool  #: False on ray termination or ``max_iter`` (the point is still returned; the caller decides)


def _lemke(M: np.ndarray, q: np.ndarray, max_iter: int) -> LemkeResult:
    """Lemke's method (covering vector of ones) with a lexicographic ratio test: a :class:`LemkeResult`."""
    N = q.shape[0]
    if N == 0 or q.min() >= 0.0:
        return LemkeResult(np.zeros(N), np.zeros(N, dtype=bool), 0, True)
    # tableau [B^-1 | -B^-1 M | -B^-1 e | B^-1 q]; columns: w (0..N-1), z (N..2N-1), z0, rhs
    Z0 = 2 * N
    T = np.empty((N, 2 * N + 2))
    T[:, :N] = np.eye(N)
    T[:, N:Z0] = -M
    T[:, Z0] = -1.0
    T[:, Z0 + 1] = q
    basis = np.arange(N)
    qmin = float(q.min())
    # first pivot: most negative q; among ties the largest index keeps rows lex-positive
    r = int(np.flatnonzero(q <= qmin + _TIE_RTOL * abs(qmin))[-1])
    z0row = r  # z0 stays in this row until it leaves, which ends the run
    e = Z0
    it = 0
    ok = False
    while True:
        col = T[:, e].copy()
        T[r] *= 1.0 / col[r]
        col[r] = 0.0
        T -= col[:, None] * T[r]
        T[:, e] = 0.0
        T[r, e] = 1.0
        leaving = int(basis[r])
        basis[r] = e
        it += 1
        if leaving == Z0:
            ok = True
            break
        rhs = T[:, -1]
        e = leaving + N if leaving < N else leaving - N  # the complement enters next
        col = T[:, e]
        if rhs[z0row] <= _Z0_RTOL * max(1.0, float(np.abs(rhs).max())):
            # z0 is numerically zero: the current point solves the LCP. Pivot z0 out on its
            # own row (a degenerate step) when possible so the basis is complementary.
            ok = True
            if abs(col[z0row]) > _PIV_RTOL * max(1.0, float(np.abs(col).max())):
                r = z0row
                continue
            break
        if it >= max_iter:
            break
        cand = np.flatnonzero(col > _PIV_RTOL * max(1.0, float(np.abs(col).max())))
        if cand.size == 0:
            break  # ray termination
        rat = rhs[cand] / col[cand]
        m = float(rat.min())
        ties = cand[rat <= m + _TIE_RTOL * max(1.0, abs(m))]
        if ties.size > 1:
            if (ties == z0row).any():
                ties = ties[ties == z0row]
            else:
                # lexicographic minimum of the rows of B^-1 divided by the pivot column: keep
                # the rows that are minimal in the first column where the candidates differ
                V = T[ties, :N] / col[ties, None]
                while ties.size > 1:
                    vmin = V.min(axis=0)
                    D = V > vmin + _TIE_RTOL * np.maximum(1.0, np.abs(vmin))
                    first = np.flatnonzero(D.any(axis=0))
                    if first.size == 0:
                        break
                    keep = ~D[:, first[0]]
                    ties = ties[keep]
                    V = V[keep]
        r = int(ties[0])
    vals = np.zeros(2 * N + 1)
    vals[basis] = np.maximum(T[:, -1], 0.0)
    zbasic = np.zeros(2 * N + 1, dtype=bool)
    zbasic[basis] = True
    return LemkeResult(vals[N:Z0], zbasic[N:Z0], it, ok)


# ----------------------------------------------------------------------------------------
# driver
# ----------------------------------------------------------------------------------------


def _repair(lcp, modes, signs, x, w):
    """One active-set correction after a rejected re-solve; None if nothing changes.

    Violated rows switch role: clamped normals with ``x < 0`` separate, separating normals
    with ``w < 0`` clamp, sticking friction beyond its box becomes bounded on that side,
    bounded friction with a wrong-signed velocity sticks, friction of a clamped normal that
    was idle sticks.
    """
    xs = float(np.abs(x).max())
    tx = _CLASSIFY_TOL * xs
    tw = _CLASSIFY_TOL * max(lcp._bnorm, lcp._anorm * xs)
    fric = lcp._fric
    m0 = np.where(modes == _TIED, _CLAMP, modes)
    m = m0.copy()
    s = np.asarray(signs, dtype=np.int64).copy()
    cl = m == _CLAMP
    m[~fric & cl & (x < -tx)] = _SEP
    m[~fric & (m == _SEP) & (w < -tw)] = _CLAMP
    a = lcp.mu * x[lcp._k]
    over = fric & cl & (x > a + tx)
    under = fric & cl & (x < -a - tx)
    wrong = fric & (m == _BOUND) & (((s > 0) & (w > tw)) | ((s < 0) & (w < -tw)))
    idle = fric & (m == _SEP) & lcp._carry
    m[over | under] = _BOUND
    s[over] = 1
    s[under] = -1
    m[wrong | idle] = _CLAMP
    s[wrong | idle] = 0
    if np.array_equal(m, m0) and np.array_equal(s, signs):
        return None
    return m, s


class _Candidate(NamedTuple):
    """Impulses tried on an active set, with what an answer reports of them."""

    x: np.ndarray  #: (n,) impulses
    w: np.ndarray  #: (n,) velocities ``A x + b``
    residual: float  #: natural-map residual (:func:`_evaluate`)
    x_scale: float  #: ``|x|_inf``
    clamped: np.ndarray  #: (n,) bool, the rows solved as clamping (:func:`_masks`)
    bounded: np.ndarray  #: (n,) bool, the friction rows solved on their box
    signs: np.ndarray  #: (n,) int, the side of each bounded row


class _Best:
    """Best finite candidate so far (smallest natural-map residual)."""

    def __init__(self):
        self.rel = np.inf
        self.item = None


def _candidate(lcp, tol, best, cm, bm, signs, x):
    """Evaluate impulses ``x`` solved on masks ``cm, bm``: (item if accepted else None, w)."""
    w, res, xs, ok = _evaluate(lcp, x, tol)
    item = _Candidate(x, w, res, xs, cm, bm, signs)
    if res < best.rel:  # best = smallest natural-map residual (finite only)
        best.rel = res
        best.item = item
    return (item if ok else None), w


def _solution(lcp, item: _Candidate, status, hit, its) -> LCPSolution:
    modes, sg = _report(lcp, item.clamped, item.bounded, item.signs, item.x, item.x_scale)
    return LCPSolution(item.x, item.w, modes, sg, status, float(item.residual), hit, its)


def solve_lcp(
    lcp: BoxedLCP,
    *,
    guess: tuple[np.ndarray, np.ndarray] | None = None,
    tol: float = 1e-9,
    max_iter: int | None = None,
) -> LCPSolution:
    """Solve the boxed LCP, exactly (to rounding) at the returned answer.

    The compiled core's solve (``cpp/src/lcp.cpp``, the same method and operations) when it is
    available, else :func:`solve_lcp_reference`; see there for the parameters and the result.
    """
    if _core is None:
        return solve_lcp_reference(lcp, guess=guess, tol=tol, max_iter=max_iter)
    gm = gs = None
    if guess is not None:
        gm, gs = np.asarray(guess[0]), np.asarray(guess[1])
        if gm.shape != lcp.b.shape or gs.shape != lcp.b.shape:
            gm = gs = None
    return _solve_compiled(lcp, gm, gs, tol, -1 if max_iter is None else max_iter)


def _solve_compiled(lcp: BoxedLCP, gm, gs, tol: float, max_iter: int) -> LCPSolution:
    """The core's solve; its arrays land in buffers made here (two numpy arrays, four views)."""
    n = lcp.b.shape[0]
    xw = np.empty((2, n))
    ms = np.empty((2, n), dtype=np.int64)
    solved, res, hit, its = _core.lcp_solve(lcp.A, lcp.b, lcp.normal_of, lcp.mu, gm, gs, tol, max_iter, xw, ms)
    return LCPSolution(xw[0], xw[1], ms[0], ms[1], "solved" if solved else "inexact", res, hit, its)


def _linearization_compiled(n: int, out, buf: np.ndarray, C: np.ndarray) -> Linearization:
    """The :class:`Linearization` the core wrote into ``buf`` (K, Fc, then P) and ``C``."""
    nc, bounded = out
    k = nc * nc
    K = buf[:k].reshape(nc, nc)
    Fc = buf[k : k + nc * n].reshape(nc, n)
    P = buf[k + nc * n : k + 2 * nc * n].reshape(n, nc) if bounded else None
    return Linearization(E=K, Fc=Fc, unknowns=C[:nc], P=P, symmetric=not bounded)


def solve_lcp_reference(
    lcp: BoxedLCP,
    *,
    guess: tuple[np.ndarray, np.ndarray] | None = None,
    tol: float = 1e-9,
    max_iter: int | None = None,
) -> LCPSolution:
    """Solve the boxed LCP, exactly (to rounding) at the returned answer (the Python reference).

    Parameters
    ----------
    lcp : the problem (n rows).
    guess : optional ``(modes, signs)``, each (n,) int, typically the previous step's
        ``LCPSolution.modes, .signs``. It is re-solved exactly (:func:`solve_active_set`) and
        accepted if within tolerance (``warm_start_hit``). Ignored if its shape is not (n,).
    tol : relative acceptance tolerance (module docstring, "Acceptance"): impulses within
        ``tol |x|_inf`` of their box, velocities complementary to ``tol |b|_inf`` (plus a
        rounding allowance ``1e-12 |A|_inf |x|_inf``).
    max_iter : pivot limit per Lemke run (default ``50 + 20 N`` for the ``N``-variable
        Stewart-Trinkle LCP).

    Returns
    -------
    LCPSolution. ``status == "inexact"`` (with the best finite iterate) when nothing reaches
    the tolerance, e.g. an infeasible problem; numerical failure never raises and never
    yields NaN.
    """
    n = lcp.n
    if n == 0:
        z = np.zeros(0)
        zi = np.zeros(0, dtype=np.int64)
        return LCPSolution(z, z.copy(), zi, zi.copy(), "solved", 0.0, False, 0)
    best = _Best()

    # (1) warm start: exact re-solve on the previous active set
    if guess is not None:
        gm = np.asarray(guess[0])
        gs = np.asarray(guess[1])
        if gm.shape == (n,) and gs.shape == (n,):
            cm, bm = _masks(lcp, gm, gs)
            item, _ = _candidate(lcp, tol, best, cm, bm, gs, _solve_masks(lcp, cm, bm, gs))
            if item is not None:
                return _solution(lcp, item, "solved", True, 0)

    # all rows separating: x = 0 solves it iff every normal row has b >= 0
    if ((lcp.b >= 0) | lcp._fric).all():
        x = np.zeros(n)
        no = np.zeros(n, dtype=bool)
        return _solution(lcp, _Candidate(x, lcp.b.copy(), 0.0, 0.0, no, no, np.zeros(n, np.int64)), "solved", False, 0)

    # (2) Lemke on the Stewart-Trinkle LCP, (3) minimal-norm re-solve on its active set
    st = _ST(lcp)
    if max_iter is None:
        max_iter = 50 + 20 * st.N
    iterations = 0
    tried: list[tuple[np.ndarray, np.ndarray]] = []

    def attempt(m, s, x0=None):
        for m2, s2 in tried:
            if x0 is None and np.array_equal(m, m2) and np.array_equal(s, s2):
                return None, None, None
        if x0 is None:
            tried.append((m, s))
        cm, bm = _masks(lcp, m, s)
        x = _solve_masks(lcp, cm, bm, s, x0)
        item, w = _candidate(lcp, tol, best, cm, bm, s, x)
        return item, x, w

    for delta in (0.0, *_REGULARISATION):
        M = st.M if delta == 0.0 else st.M + delta * np.eye(st.N)
        run = _lemke(M, st.q, max_iter)
        iterations += run.pivots
        if not np.isfinite(run.z).all():
            continue
        x_raw = st.to_x(lcp, run.z)
        w_raw = lcp.A @ x_raw + lcp.b
        # (a) maximal clamping set (TIED rows clamp) -> minimal-norm impulses, with repairs
        m, s = classify(lcp, x_raw, w_raw, tol=_CLASSIFY_TOL)
        cls_m, cls_s = m, s
        for _ in range(_REPAIR_ROUNDS + 1):
            item, x, w = attempt(m, s)
            if item is not None:
                return _solution(lcp, item, "solved", False, iterations)
            if x is None or not np.isfinite(x).all():
                break
            fix = _repair(lcp, m, s, x, w)
            if fix is None:
                break
            m, s = fix
        # (b) the pivoting basis itself (a nonsingular reduced system in exact arithmetic)
        bm_, bs_ = st.basis_modes(lcp, run.zbasic)
        item, _, _ = attempt(bm_, bs_)
        if item is not None:
            return _solution(lcp, item, "solved", False, iterations)
        # (c) TIED rows read as separating
        if (cls_m == _TIED).any():
            item, _, _ = attempt(np.where(cls_m == _TIED, _SEP, cls_m), cls_s)
            if item is not None:
                return _solution(lcp, item, "solved", False, iterations)
        # (d) the pivoting point refined on its basis, then as is
        item, _, _ = attempt(bm_, bs_, x0=x_raw)
        if item is not None:
            return _solution(lcp, item, "solved", False, iterations)
        cm, bmask = _masks(lcp, bm_, bs_)
        item, _ = _candidate(lcp, tol, best, cm, bmask, bs_, x_raw)
        if item is not None:
            return _solution(lcp, item, "solved", False, iterations)

    if best.item is None:  # pragma: no cover - every candidate is finite by construction
        x = np.zeros(n)
        w, res, xs, _ = _evaluate(lcp, x)
        no = np.zeros(n, dtype=bool)
        best.item = _Candidate(x, w, res, xs, no, no, np.zeros(n, np.int64))
    return _solution(lcp, best.item, "inexact", False, iterations)


class LCPAdapter:
    """The boxed LCP (friction pyramid) as a contact adapter (:mod:`contact.adapter`)."""

    name = "lcp"

    def problem(self, A, b, layout, phi=None, previous: BoxedLCP | None = None) -> BoxedLCP:
        """The LCP on the rows of ``layout``: each tangent row boxed by its contact's ``friction`` (one number,
        or one per contact) times its normal impulse; ``previous`` (same rows) lends its structure."""
        if previous is not None:
            return previous.with_values(A, b)
        m, r = layout.m, layout.r
        normal_of = np.full(m, -1, dtype=np.intp)
        mu = np.zeros(m)
        idx = np.arange(layout.nc) * r
        for t in range(1, r):
            normal_of[idx + t] = idx
            mu[idx + t] = layout.mu
        return BoxedLCP(A=A, b=b, normal_of=normal_of, mu=mu)

    def solve(self, lcp: BoxedLCP, guess: LCPSolution | None = None) -> LCPSolution:
        return solve_lcp(lcp, guess=None if guess is None else (guess.modes, guess.signs))

    def residual(self, lcp: BoxedLCP, lam) -> np.ndarray:
        return natural_map(lcp, lam)

    def linearize(self, lcp: BoxedLCP, sol: LCPSolution) -> Linearization:
        """The mode equations of the active set the solution was solved on (``sol.modes``, TIED rows
        clamping): ``dw_C = 0``, ``dx_B = E dx_C``, the other rows ``dx = 0`` (compiled when the core is
        available, else :meth:`linearize_reference`)."""
        if _core is None:
            return self.linearize_reference(lcp, sol)
        n = lcp.b.shape[0]
        buf, C = np.empty(3 * n * n), np.empty(n, dtype=np.int64)
        out = _core.lcp_linearize(lcp.A, lcp.b, lcp.normal_of, lcp.mu, sol.modes, sol.signs, buf, C)
        return _linearization_compiled(n, out, buf, C)

    def linearize_reference(self, lcp: BoxedLCP, sol: LCPSolution) -> Linearization:
        """:meth:`linearize` in Python (the reference)."""
        cm, bm = _masks(lcp, sol.modes, sol.signs)
        return self._linearization(lcp, cm, bm, sol.signs)

    def _linearization(self, lcp, cm, bm, signs) -> Linearization:
        C, P, K = _reduced(lcp, cm, bm, signs)
        Fc = np.eye(lcp.n).take(C, 0)
        return Linearization(E=K, Fc=Fc, unknowns=C, P=P, symmetric=P is None)

    def contact_modes(self, sol: LCPSolution, layout) -> np.ndarray:
        """:class:`Mode` of each contact's normal row (nc,)."""
        return np.asarray(sol.modes[: layout.nc * layout.r: layout.r])

    def reclassify(self, lcp: BoxedLCP, sol: LCPSolution, dl_dlam: np.ndarray) -> Linearization | None:
        """Nimble's complementarity-aware active set (:meth:`dynamics.contact_step.ContactModel.aware_velocity_jacobian`):
        a normal row whose impulse would raise the loss (``dl_dlam > 0``) clamps, one whose impulse
        would lower it separates; the friction rows of a switched normal stick with it (or separate).
        None when that changes nothing (compiled when the core is available, else :meth:`reclassify_reference`)."""
        if _core is None:
            return self.reclassify_reference(lcp, sol, dl_dlam)
        n = lcp.b.shape[0]
        buf, C = np.empty(3 * n * n), np.empty(n, dtype=np.int64)
        out = _core.lcp_reclassify(lcp.A, lcp.b, lcp.normal_of, lcp.mu, sol.modes, sol.signs, dl_dlam, buf, C)
        return None if out is None else _linearization_compiled(n, out, buf, C)

    def reclassify_reference(self, lcp: BoxedLCP, sol: LCPSolution, dl_dlam: np.ndarray) -> Linearization | None:
        """:meth:`reclassify` in Python (the reference)."""
        cm, bm = _masks(lcp, sol.modes, sol.signs)
        normal_of = lcp.normal_of
        normal = np.flatnonzero(normal_of < 0)
        flip = normal[(dl_dlam[normal] > 0) != cm[normal]]
        if not len(flip):
            return None
        cm[flip] = ~cm[flip]
        rows = np.isin(normal_of, flip)  # their friction rows follow them
        cm[rows] = cm[normal_of[rows]]
        bm[rows] = False
        return self._linearization(lcp, cm, bm, np.where(rows, 0, sol.signs))
