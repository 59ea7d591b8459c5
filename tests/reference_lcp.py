"""Slow, obviously-correct enumerating reference for the boxed contact LCP (test-only).

Independent of ``contact.lcp``: it works on the raw arrays ``A, b, normal_of, mu`` and uses
plain per-row Python loops.

* :func:`conditions_hold` checks the boxed complementarity conditions row by row, in the
  form ``lo <= x <= hi``, ``x > lo => w <= 0``, ``x < hi => w >= 0`` (normal rows: lo = 0,
  hi = inf; friction rows: lo = -mu x_k, hi = +mu x_k), with tolerance
  ``tol * max(|b|_inf, |A|_inf |x|_inf, |x|_inf)``.
* :func:`enumerate_solutions` tries *every* active set (normal row: separating / clamping;
  friction row of a clamping normal: clamping / at upper bound / at lower bound), solves the
  reduced linear system by least squares and keeps the candidates that pass
  :func:`conditions_hold`. Intended for up to 3 contacts (at most 10**3 active sets).
"""

from __future__ import annotations

import itertools

import numpy as np


def scale_of(A, b, x) -> float:
    xs = float(np.max(np.abs(x))) if len(x) else 0.0
    an = float(np.max(np.sum(np.abs(A), axis=1))) if len(x) else 0.0
    bn = float(np.max(np.abs(b))) if len(x) else 0.0
    return max(bn, an * xs, xs)


def conditions_hold(A, b, normal_of, mu, x, tol=1e-9) -> bool:
    """True iff ``x`` solves the boxed LCP to relative tolerance ``tol``."""
    A = np.asarray(A, dtype=float)
    b = np.asarray(b, dtype=float)
    x = np.asarray(x, dtype=float)
    n = len(b)
    if not np.all(np.isfinite(x)):
        return False
    w = A @ x + b
    t = tol * scale_of(A, b, x)
    for i in range(n):
        k = int(normal_of[i])
        if k < 0:
            lo, hi = 0.0, np.inf
        else:
            lo, hi = -mu[i] * x[k], mu[i] * x[k]
        if x[i] < lo - t or x[i] > hi + t:
            return False
        if x[i] > lo + t and w[i] > t:  # strictly above the lower bound: must not separate
            return False
        if x[i] < hi - t and w[i] < -t:  # strictly below the upper bound: must not penetrate
            return False
    return True


def _row_choices(normal_of, mu):
    """Per contact (a normal row and its friction rows) the list of row-mode assignments."""
    n = len(normal_of)
    groups = []
    for k in range(n):
        if normal_of[k] != -1:
            continue
        fr = [i for i in range(n) if normal_of[i] == k]
        options = [{k: "sep", **{i: "sep" for i in fr}}]
        for combo in itertools.product(["clamp", "up", "down"], repeat=len(fr)):
            options.append({k: "clamp", **dict(zip(fr, combo))})
        groups.append(options)
    return groups


def solve_assignment(A, b, normal_of, mu, assign):
    """Least-squares solve of the reduced system of one assignment ``{row: mode}``."""
    n = len(b)
    C = [i for i in range(n) if assign[i] == "clamp"]
    if not C:
        return np.zeros(n)
    P = np.zeros((n, len(C)))  # x = P x_C
    for j, i in enumerate(C):
        P[i, j] = 1.0
    for i in range(n):
        if assign[i] in ("up", "down"):
            k = int(normal_of[i])
            P[i, C.index(k)] = (1.0 if assign[i] == "up" else -1.0) * mu[i]
    K = A[C] @ P
    xc = np.linalg.lstsq(K, -b[C], rcond=1e-12)[0]
    return P @ xc


def enumerate_solutions(A, b, normal_of, mu, tol=1e-9):
    """All (assignment, x, w) whose least-squares solution passes :func:`conditions_hold`."""
    A = np.asarray(A, dtype=float)
    b = np.asarray(b, dtype=float)
    found = []
    for parts in itertools.product(*_row_choices(normal_of, mu)):
        assign = {}
        for p in parts:
            assign.update(p)
        x = solve_assignment(A, b, normal_of, mu, assign)
        if conditions_hold(A, b, normal_of, mu, x, tol):
            found.append((assign, x, A @ x + b))
    return found
