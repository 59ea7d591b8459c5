"""Compiled (numba) backward pass of box-constrained DDP: the Riccati recursion and the box QP of
every knot in one call, no Python per knot.

It is a line-by-line translation of :func:`solvers.ddp._backward_pass_reference` and
:func:`solvers.ddp._box_qp` (the reference, kept and tested equal in ``tests/test_ddp.py``): the
same numpy expressions in the same order, so that each product goes to the same BLAS routine with
the same transposition (numba calls BLAS/LAPACK for ``@``, ``cholesky`` and ``solve`` as numpy
does; ``np.linalg.inv(L)`` is numpy's ``gesv`` against the identity and ``cholesky`` its ``potrf`` on
the lower triangle, both called directly here). The
recursion is ill-conditioned where ``Quu`` is nearly singular (catapult at ``reg = 0``: two
summation orders put the gains 3e-7 apart), hence the mirroring rather than hand-written loops.

Shapes (``T`` knots): ``Fx`` (T, ndx, ndx), ``Fu`` (T, ndx, nu), ``Lx`` (T, ndx), ``Lu`` (T, nu),
``Lxx`` (T, ndx, ndx), ``Lxu`` (T, ndx, nu), ``Luu`` (T, nu, nu); ``lower``/``upper`` (T, nu) are
the control bounds minus the controls (the bounds on the step ``du``).

The functions are compiled on first use and cached on disk (``cache=True``).
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.extending import overload
from numba.np.linalg import _LAPACK, F_INT_nptype, ensure_lapack

#: what :func:`backward_pass` returns besides its outputs
OK, NON_FINITE, NOT_POSITIVE_DEFINITE = 0, 1, 2


def _inv(A):
    """``np.linalg.inv(A)`` as numpy computes it: LAPACK ``gesv`` against the identity (numba's
    ``np.linalg.solve`` would call the same, but takes ~14 s to compile)."""
    raise NotImplementedError("compiled code only")


@overload(_inv)
def _inv_impl(A):
    ensure_lapack()
    gesv = _LAPACK().numba_xgesv(A.dtype)
    kind = ord("d")

    def impl(A):
        n = A.shape[0]
        a = A.T.copy().T  # a Fortran-order copy (gesv overwrites it with the LU factors)
        b = np.eye(n).T.copy().T
        ipiv = np.empty(n, dtype=F_INT_nptype)
        info = gesv(kind, n, n, a.ctypes, n, ipiv.ctypes, b.ctypes, n)
        if info != 0:  # a singular factor: cannot happen after a successful Cholesky
            b[:] = np.nan
        return np.ascontiguousarray(b)

    return impl


@njit(cache=True)
def box_qp(H, g, lower, upper, x0, max_iter=50, tol=1e-10):
    """:func:`solvers.ddp._box_qp`: ``(x, free, H_free_inverse, ok)``; ``ok`` is False when ``H`` is
    not positive definite on the free variables (the reference raises)."""
    n = len(g)
    x = np.minimum(np.maximum(x0, lower), upper)
    free = np.ones(n, dtype=np.bool_)
    Hf_inv = np.zeros((0, 0))
    have_inverse = False
    for _ in range(max_iter):
        grad = g + H @ x
        clamped = ((x <= lower + 1e-12) & (grad > 0)) | ((x >= upper - 1e-12) & (grad < 0))
        free = ~clamped
        if not free.any():
            return x, free, np.zeros((0, 0)), True
        idx = np.nonzero(free)[0]
        Hff = _take(H, idx)
        L, ok = _cholesky(Hff)
        if not ok:
            return x, free, Hf_inv, False
        Hf_inv = _inv(L).T @ _inv(L)
        have_inverse = True
        step = np.zeros(n)
        step[idx] = -Hf_inv @ grad[idx]
        if np.abs(step).max() < tol:
            break
        # Armijo line search on the projected step
        f0 = (0.5 * x) @ H @ x + g @ x
        alpha = 1.0
        xn = x
        while alpha > 1e-10:
            xn = np.minimum(np.maximum(x + alpha * step, lower), upper)
            if (0.5 * xn) @ H @ xn + g @ xn <= f0 + (1e-4 * grad) @ (xn - x):
                break
            alpha *= 0.5
        x = xn
    if not have_inverse or Hf_inv.shape[0] != int(free.sum()):
        idx = np.nonzero(free)[0]
        Hf_inv = _inv(_take(H, idx)) if len(idx) else np.zeros((0, 0))
    return x, free, Hf_inv, True


@njit(cache=True)
def _take(H, idx):
    """``H[np.ix_(idx, idx)]`` (C-contiguous)."""
    n = len(idx)
    out = np.empty((n, n))
    for a in range(n):
        for b in range(n):
            out[a, b] = H[idx[a], idx[b]]
    return out


def _potrf_lower(A):
    """LAPACK ``potrf`` on the lower triangle of ``A`` in Fortran order (numpy's cholesky; numba's own
    factors the upper triangle of the C-order copy, which rounds differently): ``(L, info)``."""
    raise NotImplementedError("compiled code only")


@overload(_potrf_lower)
def _potrf_lower_impl(A):
    ensure_lapack()
    potrf = _LAPACK().numba_xxpotrf(A.dtype)
    kind, lower = ord("d"), ord("L")

    def impl(A):
        n = A.shape[0]
        L = A.T.copy().T  # a Fortran-order copy
        info = potrf(kind, lower, n, L.ctypes, n)
        for j in range(n):
            for i in range(j):
                L[i, j] = 0.0
        return L, info

    return impl


@njit(cache=True)
def _cholesky(A):
    """``(np.linalg.cholesky(A), True)``, or ``(A, False)`` when ``A`` is not positive definite
    (numpy raises there)."""
    L, info = _potrf_lower(A)
    if info != 0:
        return A, False
    return np.ascontiguousarray(L), True


@njit(cache=True)
def backward_pass(Fx, Fu, Lx, Lu, Lxx, Lxu, Luu, Vx_T, Vxx_T, reg, lower, upper, K, k, dV):
    """:func:`solvers.ddp._backward_pass_reference` into ``K`` (T, nu, ndx), ``k`` (T, nu) and
    ``dV = (dV1, dV2)``. Returns ``(status, t)``: :data:`OK`, or the failure (:data:`NON_FINITE`,
    :data:`NOT_POSITIVE_DEFINITE`) and the knot ``t`` where it happened."""
    T, ndx, nu = Fu.shape
    Vx = Vx_T.copy()
    Vxx = Vxx_T.copy()
    K[:] = 0.0
    k[:] = 0.0
    dV1 = 0.0
    dV2 = 0.0
    eye = np.eye(nu)
    for t in range(T - 1, -1, -1):
        Fxt, Fut = Fx[t], Fu[t]
        Qx = Lx[t] + Fxt.T @ Vx
        Qu = Lu[t] + Fut.T @ Vx
        VxxFx = Vxx @ Fxt
        Qxx = Lxx[t] + Fxt.T @ VxxFx
        Qux = Lxu[t].T + Fut.T @ VxxFx
        Quu = Luu[t] + (Fut.T @ Vxx) @ Fut
        Quu_r = Quu + reg * eye
        if not (np.all(np.isfinite(Quu_r)) and np.all(np.isfinite(Qu))):
            dV[0], dV[1] = dV1, dV2
            return NON_FINITE, t
        kt, free, Hf_inv, ok = box_qp(Quu_r, Qu, lower[t], upper[t], -k[t])
        if not ok:
            return NOT_POSITIVE_DEFINITE, t
        Kt = np.zeros((nu, ndx))
        if free.any():
            idx = np.nonzero(free)[0]
            Kt[idx] = -Hf_inv @ _rows(Qux, idx)
        K[t], k[t] = Kt, kt
        dV1 += kt @ Qu
        dV2 += ((0.5 * kt) @ Quu) @ kt
        Vx = Qx + (Kt.T @ Quu) @ kt + Kt.T @ Qu + Qux.T @ kt
        Vxx = Qxx + (Kt.T @ Quu) @ Kt + Kt.T @ Qux + Qux.T @ Kt
        Vxx = 0.5 * (Vxx + Vxx.T)
    dV[0], dV[1] = dV1, dV2
    return OK, -1


@njit(cache=True)
def _rows(A, idx):
    """``A[idx]`` (C-contiguous)."""
    out = np.empty((len(idx), A.shape[1]))
    for a in range(len(idx)):
        out[a] = A[idx[a]]
    return out


_ready = False


def _cached_on_disk() -> bool:
    """Whether numba's disk cache seems to hold :func:`backward_pass` (its index file, next to this
    module or under ``NUMBA_CACHE_DIR``): only decides whether to announce a compilation."""
    import glob
    import os

    from numba.core import config
    here = os.path.dirname(os.path.abspath(__file__))
    places = [os.path.join(here, "__pycache__")]
    if config.CACHE_DIR:
        places.append(os.path.join(config.CACHE_DIR, "**"))
    return any(glob.glob(os.path.join(p, "_ddp_kernels.backward_pass-*.nbi"), recursive=True) for p in places)


def ensure_compiled(verbose: bool = False, stream=None) -> None:
    """Compile :func:`backward_pass` (or load it from numba's disk cache) on a one-knot problem, so
    that the first solve's time budget is not spent compiling (~20 s once per machine, ~0.4 s from
    the cache). With ``verbose``, says so when it compiles. Idempotent."""
    global _ready
    if _ready:
        return
    if verbose and not _cached_on_disk():
        import sys
        print("[ddp] compiling the backward pass (once per machine, ~20 s; numba keeps it on disk) ...",
              file=stream or sys.stdout, flush=True)
    T, ndx, nu = 1, 2, 1
    z = np.zeros
    backward_pass(z((T, ndx, ndx)), z((T, ndx, nu)), z((T, ndx)), z((T, nu)), np.ones((T, ndx, ndx)),
                  z((T, ndx, nu)), np.ones((T, nu, nu)), z(ndx), np.eye(ndx), 0.0, -np.ones((T, nu)),
                  np.ones((T, nu)), z((T, nu, ndx)), z((T, nu)), z(2))
    _ready = True
